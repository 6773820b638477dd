// Compressed weight formats (docs/design.md section 4) and N:M compliance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "nmkit/pattern.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// Canonical 2:4 of a [rows, K] weight.
// Layout: values (rows, K_pad/2) in the weight dtype, K_pad = ceil(K/4)*4: each group's two kept
// values in increasing index order. meta (rows, ceil(K_pad/8)) bytes: one nibble per group,
// idx0 | idx1 << 2 with idx0 < idx1; group 2b in the low nibble of byte b, group 2b+1 in the high
// nibble (the lowest K in the lowest bits, as the hardware reads it). A group with fewer than two
// non-zeros names its non-zero positions, then the lowest-index zero positions.
// Only K is stored besides the parts: dtype and rows are the values tensor's, so they cannot
// disagree with it (validate checks meta against them).
struct Sparse24 {
  int64_t K = 0;
  Tensor values;  // dtype, [rows, K_pad/2]
  Tensor meta;    // U8, [rows, meta_stride]

  DType dtype() const { return values.dtype(); }
  int64_t rows() const { return values.shape().empty() ? 0 : values.shape()[0]; }

  int64_t K_pad() const { return (K + 3) / 4 * 4; }
  int64_t meta_stride() const { return (K_pad() + 7) / 8; }
  size_t memory_bytes() const { return values.nbytes() + meta.nbytes(); }
};

// Any keep:group as values plus a bitmask.
// Layout: values (rows, groups*keep) in the weight dtype: exactly `keep` slots per group (fixed
// stride, so a kernel can seek to any group), filled like sparse24. mask (rows, ceil(K_pad/8))
// bytes, K_pad = groups*group: bit k of a row is bit k%8 of byte k/8, exactly `keep` bits set per
// group (padding positions of the tail group may be among them).
// As for Sparse24, dtype and rows are the values tensor's.
struct NMPacked {
  Pattern pattern;
  int64_t K = 0;
  Tensor values;  // dtype, [rows, groups*keep]
  Tensor mask;    // U8, [rows, mask_stride]

  DType dtype() const { return values.dtype(); }
  int64_t rows() const { return values.shape().empty() ? 0 : values.shape()[0]; }

  int64_t groups() const { return pattern.groups(K); }
  int64_t K_pad() const { return pattern.padded(K); }
  int64_t mask_stride() const { return (K_pad() + 7) / 8; }
  size_t memory_bytes() const { return values.nbytes() + mask.nbytes(); }
};

// A group of a row with more non-zeros than the pattern allows.
struct Violation {
  int64_t row = 0;
  int64_t group = 0;
  int nonzeros = 0;
};

// First violation in row-major order, if any. A value is non-zero when it compares != 0 (NaN counts).
std::optional<Violation> find_violation(const TensorView& dense, Pattern pattern);
// The sparsest of `candidates` (fewest kept per element, keep/group) the tensor complies with.
std::optional<Pattern> sparsest_compliant(const TensorView& dense, const std::vector<Pattern>& candidates);

// Compression of a dense-masked 2-D prunable tensor. A non-compliant tensor is an Error naming
// `name`, row, group and the count of non-zeros.
Result<Sparse24> compress_sparse24(const TensorView& dense, std::string_view name = "");
Result<NMPacked> compress_nm(const TensorView& dense, Pattern pattern, std::string_view name = "");
// The same compression one row at a time, for a caller that produces the dense rows itself (pruning
// on load, prune_compress in nmkit/prune.h) and so needs no [rows, K] dense-masked tensor: empty_*
// allocate every row's parts, compress_row fills row r from `row` (out.K elements of out's dtype,
// F32, F16 or BF16) with the bytes the whole-tensor call gives, or returns the row's first
// violation. Rows may be filled in any order, concurrently.
NMPacked empty_nm(DType dtype, int64_t rows, int64_t K, Pattern pattern);
Sparse24 empty_sparse24(DType dtype, int64_t rows, int64_t K);
std::optional<Violation> compress_row(const std::byte* row, int64_t r, NMPacked& out);
std::optional<Violation> compress_row(const std::byte* row, int64_t r, Sparse24& out);
// Exact inverses: the dense-masked tensor in the weight dtype.
Tensor decompress(const Sparse24& packed);
Tensor decompress(const NMPacked& packed);

// Structural checks of packed tensors read from files (shapes, dtypes, nibble validity, bit counts);
// the Error names `name` and the first bad row/group/value.
Status validate(const Sparse24& packed, std::string_view name);
Status validate(const NMPacked& packed, std::string_view name);

}  // namespace nmkit
