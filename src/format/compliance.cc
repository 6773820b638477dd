// N:M compliance checks (docs/design.md section 2): at most `keep` non-zeros in every group, the tail
// group included. Works on raw bits, so it accepts any dtype without converting.
#include <algorithm>
#include <numeric>

#include "format/elements.h"
#include "nmkit/format.h"

namespace nmkit {
namespace {

using format_detail::magnitude_bits_mask;

// Rows and K of a tensor seen as a matrix pruned along its last dimension.
bool as_matrix(const TensorView& t, int64_t& rows, int64_t& K) {
  if (t.shape.empty()) return false;
  K = t.shape.back();
  rows = K > 0 ? t.numel() / K : 0;
  return K >= 0 && rows >= 0;
}

template <class E>
std::optional<Violation> scan(const std::byte* data, int64_t rows, int64_t K, E mag_mask,
                              Pattern p) {
  return format_detail::scan_rows(
      rows, K,
      [&](int64_t r0, int64_t r1, const std::atomic<int64_t>& stop) -> std::optional<Violation> {
        for (int64_t r = r0; r < r1 && r < stop.load(std::memory_order_relaxed); ++r) {
          const std::byte* row = data + static_cast<size_t>(r * K) * sizeof(E);
          for (int64_t c0 = 0; c0 < K; c0 += p.group) {
            const int64_t n = std::min<int64_t>(p.group, K - c0);
            int nz = 0;
            for (int64_t i = 0; i < n; ++i) {
              E v;
              std::memcpy(&v, row + (c0 + i) * sizeof(E), sizeof(E));
              nz += (v & mag_mask) != 0 ? 1 : 0;
            }
            if (nz > p.keep) return Violation{r, c0 / p.group, nz};
          }
        }
        return std::nullopt;
      });
}

}  // namespace

std::optional<Violation> find_violation(const TensorView& dense, Pattern pattern) {
  // Patterns come from Pattern::parse/make; a zero group here would loop forever.
  NMKIT_ASSERT(pattern.keep >= 1 && pattern.keep < pattern.group && pattern.group <= 64);
  int64_t rows = 0, K = 0;
  if (!as_matrix(dense, rows, K) || rows == 0 || K == 0) return std::nullopt;
  const uint64_t mask = magnitude_bits_mask(dense.dtype);
  switch (dtype_size(dense.dtype)) {
    case 1: return scan<uint8_t>(dense.data, rows, K, static_cast<uint8_t>(mask), pattern);
    case 2: return scan<uint16_t>(dense.data, rows, K, static_cast<uint16_t>(mask), pattern);
    case 4: return scan<uint32_t>(dense.data, rows, K, static_cast<uint32_t>(mask), pattern);
    default: return scan<uint64_t>(dense.data, rows, K, mask, pattern);
  }
}

std::optional<Pattern> sparsest_compliant(const TensorView& dense,
                                          const std::vector<Pattern>& candidates) {
  // Sparsest first (lowest keep/group); among equal ratios the smaller group first, since
  // compliance with 2:4 is the stronger statement than with 4:8; then the caller's order.
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Pattern& pa = candidates[a];
    const Pattern& pb = candidates[b];
    const int64_t lhs = int64_t{pa.keep} * pb.group, rhs = int64_t{pb.keep} * pa.group;
    if (lhs != rhs) return lhs < rhs;
    return pa.group < pb.group;
  });
  for (size_t i : order) {
    if (!find_violation(dense, candidates[i])) return candidates[i];
  }
  return std::nullopt;
}

}  // namespace nmkit
