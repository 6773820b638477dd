// N:M pruning (design.md section 2): scores, selection, tail groups and bad values, multithreaded
// over rows. Rows are processed in blocks of whole groups so the converted weights, keys and
// outputs of a block stay in L1; nothing is allocated per element or per row.
#include "nmkit/prune.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/threads.h"
#include "prune/select.h"

namespace nmkit {
namespace {

using prune_detail::abs_bits;
using prune_detail::pair_key;
using prune_detail::select_group;

// Elements per block: 2048 f32 weights, keys and outputs use ~40 KB of scratch.
constexpr int64_t kBlockTarget = 2048;

std::string value_str(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

std::string prefix(std::string_view name) {
  return name.empty() ? std::string() : "tensor '" + std::string(name) + "': ";
}

bool is_finite_bits(float v) { return (std::bit_cast<uint32_t>(v) & 0x7F800000u) != 0x7F800000u; }

// The first non-finite input found, in row-major order; at one position the weight comes first.
struct BadValue {
  int64_t row = 0;
  int64_t col = 0;
  int which = 0;  // 0: weight, 1: gradient
  float value = 0;
  bool before(const BadValue& o) const {
    if (row != o.row) return row < o.row;
    if (col != o.col) return col < o.col;
    return which < o.which;
  }
};

struct Job {
  const TensorView* w = nullptr;
  const TensorView* gradient = nullptr;
  const float* norms = nullptr;  // K values, all finite
  PruneMethod method = PruneMethod::Magnitude;
  Pattern pattern;
  std::byte* dst = nullptr;
  int64_t rows = 0, K = 0, block = 0;
  std::vector<PruneSums>* row_sums = nullptr;

  std::atomic<int64_t> stop_row{0};  // rows at or after the first bad one need not be looked at
  std::mutex bad_mutex;
  std::optional<BadValue> bad;

  void report(const BadValue& b) {
    std::lock_guard lock(bad_mutex);
    if (!bad || b.before(*bad)) bad = b;
    int64_t cur = stop_row.load(std::memory_order_relaxed);
    while (b.row < cur && !stop_row.compare_exchange_weak(cur, b.row)) {
    }
  }
};

// Per-chunk scratch, one allocation per worker and call.
template <class E>
struct Scratch {
  std::vector<float> wf, gf;
  std::vector<uint64_t> key64;
  std::vector<uint32_t> key32;
  std::vector<int32_t> kept;  // 0 or 1 per element
  std::vector<E> raw, out;
  explicit Scratch(int64_t block)
      : wf(block), gf(block), key64(block), key32(block), kept(block), raw(block), out(block) {}
};

// Whether x[0, n) holds a NaN or infinity (all exponent bits set); branch-free so it vectorizes.
bool any_non_finite(const float* x, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t e = std::bit_cast<uint32_t>(x[i]) & 0x7F800000u;
    any |= static_cast<uint32_t>(e == 0x7F800000u);
  }
  return any != 0;
}

// First non-finite element of x[0, n), or -1.
int64_t first_non_finite(const float* x, int64_t n) {
  if (!any_non_finite(x, n)) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!is_finite_bits(x[i])) return i;
  }
  return -1;
}

// Sums of one row: four interleaved float64 lanes per quantity break the add latency chains and
// let the compiler use packed adds; the lane order is fixed, so the result does not depend on the
// thread count. kept is 0 or 1, so d*kept and d - d*kept are exactly d or 0 (no branches).
struct Lanes {
  double abs_kept[4] = {}, abs_pruned[4] = {}, sq_kept[4] = {}, sq_pruned[4] = {};
  int64_t kept = 0;

  void add(const float* wf, const int32_t* kept_flags, int64_t n) {
    int64_t i = 0;
    int32_t kept_sum = 0;
    for (; i + 4 <= n; i += 4) {
      for (int l = 0; l < 4; ++l) {
        const double d = std::fabs(static_cast<double>(wf[i + l]));
        const double dk = d * static_cast<double>(kept_flags[i + l]);
        const double dp = d - dk;
        abs_kept[l] += dk;
        abs_pruned[l] += dp;
        sq_kept[l] += dk * dk;  // exact: a float's 24-bit significand squared fits in 53 bits
        sq_pruned[l] += dp * dp;
        kept_sum += kept_flags[i + l];
      }
    }
    for (; i < n; ++i) {
      const int l = static_cast<int>(i & 3);
      const double d = std::fabs(static_cast<double>(wf[i]));
      const double dk = d * static_cast<double>(kept_flags[i]);
      const double dp = d - dk;
      abs_kept[l] += dk;
      abs_pruned[l] += dp;
      sq_kept[l] += dk * dk;
      sq_pruned[l] += dp * dp;
      kept_sum += kept_flags[i];
    }
    kept += kept_sum;
  }

  static double total(const double* x) { return (x[0] + x[1]) + (x[2] + x[3]); }
};

// Selection over the whole groups of a block (a multiple of G elements), G known at compile time
// so the rank comparisons unroll.
template <int G, class Key>
void select_fixed_groups(const Key* key, int64_t n, int keep, int32_t* kept) {
  for (int64_t off = 0; off < n; off += G) {
    const uint64_t mask = prune_detail::select_fixed<Key, G>(key + off, keep);
    for (int j = 0; j < G; ++j) kept[off + j] = static_cast<int32_t>((mask >> j) & 1u);
  }
}

// Selection over a block starting at column col0: whole groups, then the row's tail group if the
// block ends the row with one.
template <class Key>
void select_block(const Key* key, int64_t n, int64_t col0, int64_t K, Pattern p, int32_t* kept) {
  const int64_t full = (col0 + n == K) ? n / p.group * p.group : n;
  switch (p.group) {
    case 4: select_fixed_groups<4>(key, full, p.keep, kept); break;
    case 8: select_fixed_groups<8>(key, full, p.keep, kept); break;
    case 16: select_fixed_groups<16>(key, full, p.keep, kept); break;
    default:
      for (int64_t off = 0; off < full; off += p.group) {
        const uint64_t mask = select_group(key + off, p.group, p.keep);
        for (int j = 0; j < p.group; ++j) kept[off + j] = static_cast<int32_t>((mask >> j) & 1u);
      }
      break;
  }
  if (full < n) {
    const int t = static_cast<int>(n - full);
    const uint64_t mask = select_group(key + full, t, p.keep);
    for (int j = 0; j < t; ++j) kept[full + j] = static_cast<int32_t>((mask >> j) & 1u);
  }
}

template <class E>
void prune_rows(Job& job, int64_t r0, int64_t r1) {
  const TensorView& w = *job.w;
  constexpr size_t esize = sizeof(E);
  Scratch<E> s(job.block);
  const size_t g_esize = job.gradient ? dtype_size(job.gradient->dtype) : 0;
  for (int64_t r = r0; r < r1; ++r) {
    if (r >= job.stop_row.load(std::memory_order_relaxed)) return;
    const std::byte* wrow = w.data + static_cast<size_t>(r * job.K) * esize;
    std::byte* drow = job.dst + static_cast<size_t>(r * job.K) * esize;
    Lanes lanes;
    for (int64_t c0 = 0; c0 < job.K; c0 += job.block) {
      const int64_t n = std::min(job.block, job.K - c0);
      float* wf = s.wf.data();
      E* raw = s.raw.data();
      std::memcpy(raw, wrow + c0 * esize, n * esize);
      if constexpr (sizeof(E) == 4) {
        std::memcpy(wf, raw, n * esize);
      } else {
        convert_to_f32(w.dtype, raw, wf, n);
      }
      bool bad = any_non_finite(wf, n);
      if (job.gradient) {
        const std::byte* grow = job.gradient->data + static_cast<size_t>(r * job.K + c0) * g_esize;
        convert_to_f32(job.gradient->dtype, grow, s.gf.data(), n);
        bad = bad || any_non_finite(s.gf.data(), n);
      }
      if (bad) {
        const int64_t bad_w = first_non_finite(wf, n);
        const int64_t bad_g = job.gradient ? first_non_finite(s.gf.data(), n) : -1;
        const bool weight_first = bad_w >= 0 && (bad_g < 0 || bad_w <= bad_g);
        const int64_t i = weight_first ? bad_w : bad_g;
        job.report(BadValue{r, c0 + i, weight_first ? 0 : 1, weight_first ? wf[i] : s.gf[i]});
        return;
      }
      int32_t* kept = s.kept.data();
      switch (job.method) {
        case PruneMethod::Magnitude: {
          uint32_t* key = s.key32.data();
          for (int64_t i = 0; i < n; ++i) key[i] = abs_bits(wf[i]);
          select_block(key, n, c0, job.K, job.pattern, kept);
          break;
        }
        case PruneMethod::Gradient: {
          const float* gf = s.gf.data();
          uint64_t* key = s.key64.data();
          for (int64_t i = 0; i < n; ++i) key[i] = pair_key(std::fabs(wf[i] * gf[i]), wf[i]);
          select_block(key, n, c0, job.K, job.pattern, kept);
          break;
        }
        case PruneMethod::Wanda: {
          const float* a = job.norms + c0;
          uint64_t* key = s.key64.data();
          for (int64_t i = 0; i < n; ++i) key[i] = pair_key(std::fabs(wf[i]) * a[i], wf[i]);
          select_block(key, n, c0, job.K, job.pattern, kept);
          break;
        }
      }
      lanes.add(wf, kept, n);
      // Kept elements keep their raw bits; pruned ones become all-zero bits, +0 in every dtype.
      E* out = s.out.data();
      for (int64_t i = 0; i < n; ++i) out[i] = raw[i] & static_cast<E>(-kept[i]);
      std::memcpy(drow + c0 * esize, out, n * esize);
    }
    PruneSums& rs = (*job.row_sums)[r];
    rs.total_count = job.K;
    rs.pruned_count = job.K - lanes.kept;
    rs.abs_kept = Lanes::total(lanes.abs_kept);
    rs.abs_pruned = Lanes::total(lanes.abs_pruned);
    const double sq_kept = Lanes::total(lanes.sq_kept);
    rs.sq_pruned = Lanes::total(lanes.sq_pruned);
    rs.sq_total = sq_kept + rs.sq_pruned;
  }
}

Status check_prunable(const TensorView& t, const std::string& what, std::string_view name) {
  if (!is_prunable(t.dtype)) {
    return Error(prefix(name) + what + " has dtype " + std::string(dtype_name(t.dtype)) +
                 ", expected F32, F16 or BF16");
  }
  if (t.data == nullptr && t.numel() > 0) return Error(prefix(name) + what + " has no data");
  return ok_status();
}

}  // namespace

Result<PruneSums> prune_into(const TensorView& w, Pattern pattern, PruneMethod method,
                             const ScoreInputs& inputs, std::byte* dst, std::string_view name) {
  if (w.shape.size() != 2) {
    return Error(prefix(name) + "pruning needs a 2-D weight [rows, K], got shape " +
                 shape_str(w.shape));
  }
  NMKIT_TRY(check_prunable(w, "weight", name));
  if (auto checked = Pattern::make(pattern.keep, pattern.group); !checked.ok()) {
    return checked.error().with_context(prefix(name));
  }
  const int64_t rows = w.rows(), K = w.cols();
  if (rows < 0 || K < 0) return Error(prefix(name) + "negative shape " + shape_str(w.shape));

  const TensorView* gradient = nullptr;
  std::vector<float> norms;
  if (method == PruneMethod::Gradient) {
    gradient = inputs.gradient;
    if (gradient == nullptr) {
      return Error(prefix(name) + "method gradient needs a gradient tensor of shape " +
                   shape_str(w.shape));
    }
    NMKIT_TRY(check_prunable(*gradient, "gradient", name));
    if (gradient->shape != w.shape) {
      return Error(prefix(name) + "gradient has shape " + shape_str(gradient->shape) +
                   ", expected the weight's shape " + shape_str(w.shape));
    }
  } else if (method == PruneMethod::Wanda) {
    const TensorView* a = inputs.act_norms;
    if (a == nullptr) {
      return Error(prefix(name) + "method wanda needs an activation-norm vector of shape [" +
                   std::to_string(K) + "]");
    }
    NMKIT_TRY(check_prunable(*a, "act_norms", name));
    if (a->shape != Shape{K}) {
      return Error(prefix(name) + "act_norms has shape " + shape_str(a->shape) + ", expected [" +
                   std::to_string(K) + "] (K of the weight " + shape_str(w.shape) + ")");
    }
    norms.resize(K);
    convert_to_f32(a->dtype, a->data, norms.data(), K);
    const int64_t bad = first_non_finite(norms.data(), K);
    if (bad >= 0) {
      return Error(prefix(name) + "act_norms at column " + std::to_string(bad) + " is " +
                   value_str(norms[bad]));
    }
  }

  std::vector<PruneSums> row_sums(rows);
  Job job;
  job.w = &w;
  job.gradient = gradient;
  job.norms = norms.data();
  job.method = method;
  job.pattern = pattern;
  job.dst = dst;
  job.rows = rows;
  job.K = K;
  job.block = std::max<int64_t>(1, kBlockTarget / pattern.group) * pattern.group;
  job.row_sums = &row_sums;
  job.stop_row.store(rows);
  if (K > 0 && rows > 0) {
    // Enough rows per grain that a chunk has ~64K elements of work.
    const int64_t grain = std::max<int64_t>(1, 65536 / K);
    parallel_for(rows, grain, [&job, &w](int64_t r0, int64_t r1) {
      if (dtype_size(w.dtype) == 4) {
        prune_rows<uint32_t>(job, r0, r1);
      } else {
        prune_rows<uint16_t>(job, r0, r1);
      }
    });
  }
  if (job.bad) {
    const BadValue& b = *job.bad;
    return Error(prefix(name) + (b.which == 0 ? "weight" : "gradient") + " at row " +
                 std::to_string(b.row) + ", column " + std::to_string(b.col) + " is " +
                 value_str(b.value));
  }
  PruneSums total;
  for (const PruneSums& rs : row_sums) total += rs;
  return total;
}

Result<PruneResult> prune(const TensorView& w, Pattern pattern, PruneMethod method,
                          const ScoreInputs& inputs, std::string_view name) {
  if (w.shape.size() != 2) {
    return Error(prefix(name) + "pruning needs a 2-D weight [rows, K], got shape " +
                 shape_str(w.shape));
  }
  NMKIT_TRY(check_prunable(w, "weight", name));
  PruneResult result;
  result.pruned = Tensor::empty(w.dtype, w.shape);
  auto sums = prune_into(w, pattern, method, inputs, result.pruned.data(), name);
  if (!sums.ok()) return sums.error();
  result.sums = *sums;
  return result;
}

}  // namespace nmkit
