// N:M pruning (docs/design.md section 2): scores, selection, tail groups and bad values, multithreaded
// over rows. Rows are processed in blocks of whole groups so the converted weights, keys and
// flags of a block stay in cache; nothing is allocated per element or per row.
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
#include "prune/row_sums.h"
#include "prune/select.h"
#include "prune/select_simd.h"

namespace nmkit {
namespace {

using prune_detail::abs_key;
using prune_detail::score_key;
using prune_detail::select_group;

// Elements per block: with keys, flags and converted inputs, about 50 KB of scratch per thread.
constexpr int64_t kBlockTarget = 2048;

std::string value_str(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

std::string prefix(std::string_view name) {
  return name.empty() ? std::string() : "tensor '" + std::string(name) + "': ";
}

// An Error about one operand of the call, on the named tensor (unnamed calls leave the tensor out).
Error located(const Error& error, std::string_view name, const char* operand) {
  const Error e = error.with_operand(operand);
  return name.empty() ? e : e.with_tensor(std::string(name));
}

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
  std::byte* dst = nullptr;            // the dense-masked tensor, or
  const PrunedRowSink* sink = nullptr;  // where each pruned row goes instead
  int64_t rows = 0, K = 0, block = 0;
  int64_t window_begin = 0;              // first row of the window row_sums holds
  std::vector<PruneSums>* row_sums = nullptr;  // one entry per row of the current window, or null:
                                               // no sums (a caller that has no use for them)

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
  std::vector<int32_t> primary, secondary;  // selection keys (select.h)
  std::vector<int32_t> kept;                // 0 or 1 per element
  std::vector<E> raw;
  std::vector<E> row;  // the row handed to a sink (empty without one)
  Scratch(int64_t block, int64_t row_elements)
      : wf(block), gf(block), primary(block), secondary(block), kept(block), raw(block), row(row_elements) {}
};

// One group of n <= 64 elements by the scalar paths of select.h.
template <bool kPair>
void select_one(const int32_t* primary, const int32_t* secondary, int n, int keep, int32_t* kept) {
  uint64_t mask = 0;
  if constexpr (kPair) {
    uint64_t key[64];
    for (int j = 0; j < n; ++j) key[j] = prune_detail::composite_key(primary[j], secondary[j]);
    mask = select_group(key, n, keep);
  } else {
    uint32_t key[64];  // abs_key values are non-negative, so unsigned order is the same
    for (int j = 0; j < n; ++j) key[j] = static_cast<uint32_t>(primary[j]);
    mask = select_group(key, n, keep);
  }
  for (int j = 0; j < n; ++j) kept[j] = static_cast<int32_t>((mask >> j) & 1u);
}

template <int G, bool kPair>
int64_t select_quads(const int32_t* primary, const int32_t* secondary, int64_t full, int keep,
                     int32_t* kept) {
  int64_t off = 0;
  for (; off + 4 * G <= full; off += 4 * G) {
    prune_detail::select4_groups<G, kPair>(primary + off, secondary + off, keep, kept + off);
  }
  return off;
}

// Selection over a block starting at column col0: whole groups four at a time where the width has
// a vector path, the rest one by one, then the row's tail group if the block ends the row.
template <bool kPair>
void select_block(const int32_t* primary, const int32_t* secondary, int64_t n, int64_t col0,
                  int64_t K, Pattern p, int32_t* kept) {
  const int64_t full = (col0 + n == K) ? n / p.group * p.group : n;
  int64_t off = 0;
  switch (p.group) {
    case 4: off = select_quads<4, kPair>(primary, secondary, full, p.keep, kept); break;
    case 8: off = select_quads<8, kPair>(primary, secondary, full, p.keep, kept); break;
    case 12: off = select_quads<12, kPair>(primary, secondary, full, p.keep, kept); break;
    case 16: off = select_quads<16, kPair>(primary, secondary, full, p.keep, kept); break;
    default:
      for (; off + 4 * p.group <= full; off += 4 * p.group) {
        prune_detail::select4_groups_any<kPair>(primary + off, secondary + off, p.group, p.keep,
                                                kept + off);
      }
      break;
  }
  for (; off < n; off += p.group) {
    const int g = static_cast<int>(std::min<int64_t>(p.group, n - off));
    select_one<kPair>(primary + off, secondary + off, g, p.keep, kept + off);
  }
}

template <class E>
void prune_rows(Job& job, int64_t r0, int64_t r1) {
  const TensorView& w = *job.w;
  constexpr size_t esize = sizeof(E);
  Scratch<E> s(job.block, job.sink ? job.K : 0);
  const size_t g_esize = job.gradient ? dtype_size(job.gradient->dtype) : 0;
  for (int64_t r = r0; r < r1; ++r) {
    if (r >= job.stop_row.load(std::memory_order_relaxed)) return;
    const std::byte* wrow = w.data + static_cast<size_t>(r * job.K) * esize;
    std::byte* drow = job.sink ? reinterpret_cast<std::byte*>(s.row.data())
                               : job.dst + static_cast<size_t>(r * job.K) * esize;
    prune_detail::RowSums lanes;
    for (int64_t c0 = 0; c0 < job.K; c0 += job.block) {
      const int64_t n = std::min(job.block, job.K - c0);
      float* wf = s.wf.data();
      const E* raw = s.raw.data();
      if constexpr (sizeof(E) == 4) {
        std::memcpy(wf, wrow + c0 * esize, n * esize);  // f32: the raw bits are wf's bits
      } else {
        std::memcpy(s.raw.data(), wrow + c0 * esize, n * esize);
        convert_to_f32(w.dtype, s.raw.data(), wf, static_cast<size_t>(n));
      }
      bool bad = first_non_finite(wf, n) >= 0;
      if (job.gradient) {
        const std::byte* grow = job.gradient->data + static_cast<size_t>(r * job.K + c0) * g_esize;
        convert_to_f32(job.gradient->dtype, grow, s.gf.data(), static_cast<size_t>(n));
        bad = bad || first_non_finite(s.gf.data(), n) >= 0;
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
      int32_t* primary = s.primary.data();
      int32_t* secondary = s.secondary.data();
      switch (job.method) {
        case PruneMethod::Magnitude:
          for (int64_t i = 0; i < n; ++i) primary[i] = abs_key(wf[i]);
          select_block<false>(primary, secondary, n, c0, job.K, job.pattern, kept);
          break;
        case PruneMethod::Gradient: {
          const float* gf = s.gf.data();
          for (int64_t i = 0; i < n; ++i) {
            primary[i] = score_key(std::fabs(wf[i] * gf[i]));
            secondary[i] = abs_key(wf[i]);
          }
          select_block<true>(primary, secondary, n, c0, job.K, job.pattern, kept);
          break;
        }
        case PruneMethod::Wanda: {
          const float* a = job.norms + c0;
          for (int64_t i = 0; i < n; ++i) {
            primary[i] = score_key(std::fabs(wf[i]) * a[i]);
            secondary[i] = abs_key(wf[i]);
          }
          select_block<true>(primary, secondary, n, c0, job.K, job.pattern, kept);
          break;
        }
      }
      if (job.row_sums) lanes.add(wf, kept, n);
      // Kept elements keep their raw bits; pruned ones become all-zero bits, +0 in every dtype.
      std::byte* out = drow + c0 * esize;
      for (int64_t i = 0; i < n; ++i) {
        E bits;
        if constexpr (sizeof(E) == 4) {
          bits = std::bit_cast<E>(wf[i]);
        } else {
          bits = raw[i];
        }
        const E v = bits & static_cast<E>(-kept[i]);
        std::memcpy(out + i * esize, &v, esize);
      }
    }
    if (job.sink) (*job.sink)(r, drow);
    if (!job.row_sums) continue;
    PruneSums& rs = (*job.row_sums)[static_cast<size_t>(r - job.window_begin)];
    rs.total_count = job.K;
    rs.pruned_count = job.K - lanes.kept;
    rs.abs_kept = prune_detail::RowSums::total(lanes.abs_kept);
    rs.abs_pruned = prune_detail::RowSums::total(lanes.abs_pruned);
    const double sq_kept = prune_detail::RowSums::total(lanes.sq_kept);
    rs.sq_pruned = prune_detail::RowSums::total(lanes.sq_pruned);
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

// prune_into and prune_rows_to: the rows written to dst, or handed to sink.
Result<PruneSums> prune_tensor(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                               std::byte* dst, const PrunedRowSink* sink, bool sums, std::string_view name) {
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
      // Structured, so a caller knows the bad value came from the norms (and from which file).
      return located(Error(ErrorCode::InvalidValue, "is " + value_str(norms[bad])), name, "act_norms")
          .with_column(bad);
    }
    // A norm is >= 0; a negative one would turn |w|*a into a score that ranks the smallest weights
    // first (-0 compares equal to 0 and is accepted).
    for (int64_t k = 0; k < K; ++k) {
      if (norms[static_cast<size_t>(k)] < 0.0f) {
        return located(Error(ErrorCode::InvalidValue,
                             "is " + value_str(norms[static_cast<size_t>(k)]) + ", but norms are never negative"),
                       name, "act_norms")
            .with_column(k);
      }
    }
  }

  if (rows == 0 || K == 0) {  // nothing to prune; O(1) also for [2^48, 0]
    PruneSums empty;
    return empty;
  }
  // Row sums are kept for one window of rows at a time and added in row order, so the totals do
  // not depend on the thread count and memory stays bounded: 48 bytes per row of the whole tensor
  // took 2.4 GB for a [50M, 1] f16 weight of 100 MB. Enough ~64K-element grains per window to
  // keep every thread busy, at most 2^18 rows (12 MB of sums).
  const int64_t grain = std::max<int64_t>(1, 65536 / K);
  const int64_t window_rows = std::min<int64_t>(
      {rows, std::max<int64_t>(grain * 4 * thread_count(), int64_t{1} << 16), int64_t{1} << 18});
  std::vector<PruneSums> row_sums(sums ? static_cast<size_t>(window_rows) : 0);
  Job job;
  job.w = &w;
  job.gradient = gradient;
  job.norms = norms.data();
  job.method = method;
  job.pattern = pattern;
  job.dst = dst;
  job.sink = sink;
  job.rows = rows;
  job.K = K;
  job.block = std::max<int64_t>(1, kBlockTarget / pattern.group) * pattern.group;
  job.row_sums = sums ? &row_sums : nullptr;
  job.stop_row.store(rows);
  PruneSums total;
  for (int64_t w0 = 0; w0 < rows && !job.bad; w0 += window_rows) {
    const int64_t n = std::min(window_rows, rows - w0);
    job.window_begin = w0;
    // Enough rows per grain that a chunk has ~64K elements of work.
    parallel_for(n, std::min(grain, n), [&job, &w, w0](int64_t r0, int64_t r1) {
      if (dtype_size(w.dtype) == 4) {
        prune_rows<uint32_t>(job, w0 + r0, w0 + r1);
      } else {
        prune_rows<uint16_t>(job, w0 + r0, w0 + r1);
      }
    });
    if (job.bad) break;
    for (int64_t i = 0; sums && i < n; ++i) total += row_sums[static_cast<size_t>(i)];
  }
  if (job.bad) {
    const BadValue& b = *job.bad;
    return located(Error(ErrorCode::InvalidValue, "is " + value_str(b.value)), name, b.which == 0 ? "weight" : "gradient")
        .with_row(b.row)
        .with_column(b.col);
  }
  return total;
}

}  // namespace

Result<PruneSums> prune_into(const TensorView& w, Pattern pattern, PruneMethod method,
                             const ScoreInputs& inputs, std::byte* dst, std::string_view name) {
  return prune_tensor(w, pattern, method, inputs, dst, nullptr, true, name);
}

Status prune_rows_to(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                     const PrunedRowSink& sink, PruneSums* sums, std::string_view name) {
  auto result = prune_tensor(w, pattern, method, inputs, nullptr, &sink, sums != nullptr, name);
  if (!result.ok()) return result.error();
  if (sums) *sums = *result;
  return ok_status();
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
