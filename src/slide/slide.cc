// Greedy window placement of a keep:2N weight onto 2:4 windows (docs/design.md section 5).
#include "nmkit/slide.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "nmkit/threads.h"

namespace nmkit {
namespace {

std::string label(std::string_view name) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + std::string(...) + "'".
  std::string text = "'";
  if (name.empty()) return "weight";
  text.append(name);
  text.push_back('\'');
  return text;
}

// Whether element k of a row is non-zero: floating dtypes ignore the sign bit (so -0 is zero), every
// other dtype compares all bits.
bool nonzero(const std::byte* row, int64_t k, size_t size, bool floating) {
  const std::byte* p = row + static_cast<size_t>(k) * size;
  switch (size) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return (floating ? (v & 0x7F) : v) != 0;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (floating ? (v & 0x7FFF) : v) != 0;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return (floating ? (v & 0x7FFFFFFFu) : v) != 0;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return (floating ? (v & 0x7FFFFFFFFFFFFFFFull) : v) != 0;
    }
  }
}

struct Failure {
  int64_t row = -1;
  int64_t group = 0;
  int count = 0;
  bool unplaced = false;  // greedy placement left a non-zero (cannot happen for a compliant group)
};

// Slides one row; returns a failure with row < 0 on success.
Failure slide_row(const std::byte* src, std::byte* dst, int64_t row, const SlideGeometry& g,
                  size_t size, bool floating) {
  const int group = g.pattern.group;
  const int windows = g.windows_per_group();
  const int64_t out_group = 4 * static_cast<int64_t>(windows);
  const int64_t groups = g.K_pad() / group;
  std::memset(dst, 0, static_cast<size_t>(g.K_prime()) * size);
  bool is_nonzero[Pattern::kMaxGroup];
  bool placed[Pattern::kMaxGroup];
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t begin = q * group;
    const int real = static_cast<int>(std::min<int64_t>(group, g.K - begin));
    int count = 0;
    for (int i = 0; i < group; ++i) {
      is_nonzero[i] = i < real && nonzero(src, begin + i, size, floating);
      placed[i] = false;
      count += is_nonzero[i] ? 1 : 0;
    }
    if (count > g.pattern.keep) return Failure{row, q, count, false};
    std::byte* out = dst + static_cast<size_t>(q * out_group) * size;
    for (int w = 0; w < windows; ++w) {
      int held = 0;
      for (int lane = 0; lane < 4; ++lane) {
        const int i = 2 * w + lane;
        if (is_nonzero[i] && !placed[i] && held < 2) {
          std::memcpy(out + static_cast<size_t>(4 * w + lane) * size,
                      src + static_cast<size_t>(begin + i) * size, size);
          placed[i] = true;
          ++held;
        }
      }
    }
    for (int i = 0; i < group; ++i) {
      if (is_nonzero[i] && !placed[i]) return Failure{row, q, count, true};
    }
  }
  return Failure{};
}

Status check_matrix(const TensorView& t, int64_t K, std::string_view what, std::string_view name) {
  if (t.shape.size() != 2) {
    return Error(std::string(what) + " " + label(name) + ": expected a 2-D tensor, got shape " +
                 shape_str(t.shape));
  }
  if (t.cols() != K) {
    return Error(std::string(what) + " " + label(name) + ": K = " + std::to_string(t.cols()) +
                 " but the slide geometry has K = " + std::to_string(K));
  }
  return ok_status();
}

}  // namespace

Result<Tensor> slide(const TensorView& w, const SlideGeometry& geometry, std::string_view name) {
  NMKIT_TRY(check_matrix(w, geometry.K, "slide", name));
  const int64_t rows = w.rows();
  const size_t size = dtype_size(w.dtype);
  const bool floating = is_floating(w.dtype);
  Tensor out = Tensor::empty(w.dtype, {rows, geometry.K_prime()});
  const size_t src_stride = static_cast<size_t>(geometry.K) * size;
  const size_t dst_stride = static_cast<size_t>(geometry.K_prime()) * size;

  std::mutex mutex;
  Failure first;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, geometry.K));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      Failure f = slide_row(w.data + static_cast<size_t>(r) * src_stride,
                            out.data() + static_cast<size_t>(r) * dst_stride, r, geometry, size,
                            floating);
      if (f.row >= 0) {
        std::lock_guard<std::mutex> lock(mutex);
        if (first.row < 0 || f.row < first.row) first = f;
        return;  // later rows of this chunk cannot fail earlier than this one
      }
    }
  });
  if (first.row >= 0) {
    const int64_t group = geometry.pattern.group;
    const int64_t col0 = first.group * group;
    const int64_t col1 = std::min(col0 + group, geometry.K) - 1;
    std::string message = label(name) + ": row " + std::to_string(first.row) + ", group " +
                          std::to_string(first.group) + " (columns " + std::to_string(col0) + ".." +
                          std::to_string(col1) + ") has " + std::to_string(first.count) +
                          " non-zeros; pattern " + geometry.pattern.str() + " allows at most " +
                          std::to_string(geometry.pattern.keep);
    if (first.unplaced) message += " (a non-zero found no free window slot)";
    return Error(ErrorCode::InvalidValue, message);
  }
  return out;
}

Result<SlidWeight> slide(const TensorView& w, Pattern pattern, int align, std::string_view name) {
  if (w.shape.size() != 2) {
    return Error("slide " + label(name) + ": expected a 2-D tensor, got shape " + shape_str(w.shape));
  }
  auto geometry = SlideGeometry::make(pattern, w.cols(), align);
  if (!geometry.ok()) return geometry.error().with_context(label(name) + ": ");
  auto weight = slide(w, *geometry, name);
  if (!weight.ok()) return weight.error();
  return SlidWeight{*geometry, std::move(*weight)};
}

Result<Sparse24> slide_sparse24(const TensorView& w, const SlideGeometry& geometry,
                                std::string_view name) {
  auto dense = slide(w, geometry, name);
  if (!dense.ok()) return dense.error();
  return compress_sparse24(dense->view(), name);
}

std::vector<int64_t> lift_index_map(const SlideGeometry& geometry) {
  std::vector<int64_t> map(static_cast<size_t>(geometry.K_prime()));
  for (int64_t j = 0; j < geometry.K_prime(); ++j) map[static_cast<size_t>(j)] = geometry.source_column(j);
  return map;
}

Result<Tensor> lift(const TensorView& x, const SlideGeometry& geometry, std::string_view name) {
  NMKIT_TRY(check_matrix(x, geometry.K, "lift", name));
  const std::vector<int64_t> map = lift_index_map(geometry);
  const size_t size = dtype_size(x.dtype);
  Tensor out = Tensor::empty(x.dtype, {x.rows(), geometry.K_prime()});
  const size_t src_stride = static_cast<size_t>(geometry.K) * size;
  const size_t dst_stride = static_cast<size_t>(geometry.K_prime()) * size;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, geometry.K_prime()));
  parallel_for(x.rows(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const std::byte* src = x.data + static_cast<size_t>(m) * src_stride;
      std::byte* dst = out.data() + static_cast<size_t>(m) * dst_stride;
      for (size_t j = 0; j < map.size(); ++j) {
        if (map[j] < 0) {
          std::memset(dst + j * size, 0, size);
        } else {
          std::memcpy(dst + j * size, src + static_cast<size_t>(map[j]) * size, size);
        }
      }
    }
  });
  return out;
}

}  // namespace nmkit
