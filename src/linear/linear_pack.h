// Repacking of weights into the kernels' layouts (SparseLinear, include/nmkit/linear.h).
//
// Layout (the packed weight; X is copied once per call into rows of K_x = K rounded up to the chunk
// width, zero-filled, so kernels never see a tail):
//   dense f32/bf16: plain rows, row r's K values contiguous (rows, K): the layout of the file and of
//     oneDNN's plain weights ("ba"), so a weight is read where it lies (SparseLinear::dense over
//     parts) or copied once; the kernels read 4 rows at a time and mask each row's last 32-wide step.
//   dense int8: rows (rows, K_x) of codes, K_x = K rounded up to 64, zero past K.
//   sparse24 f32/bf16 (K_x a multiple of 64, so the bf16-activation kernel takes chunk pairs):
//     values (rows_pad/4, K_x/32, 4, 16): each row's 16 kept values of the chunk,
//     as in the sparse24 format; meta (rows_pad/4, K_x/32, 4) 32-bit words, each the 8 nibbles of one
//     row's chunk in sparse24 order (2-bit field s of the word = position of value s in its group).
//     Padding groups are (0, 1) with zero values.
//   nm f32/bf16: K in superchunks of S = lcm(group, 32) elements (K_x a multiple of S); values
//     (rows_pad/4, K_x/S, 4, S/group*keep) and masks (rows_pad/4, K_x/S, 4, S/8) bytes, each row's
//     slots and mask bits of the superchunk as in the nm format (groups past the weight are empty),
//     plus a slack of zeros after the values so a kernel may load a full vector at the last value.
//   sparse24 int8 (and slid): as sparse24 f32 with int8 values and K chunks of 128 (64 values and
//     16 bytes of meta, i.e. four 32-bit words, per row and chunk), except that K_x is K rounded up to
//     64 and, when that is an odd multiple of 64, a row block ends with a chunk of 64 K ((4, 32)
//     values and (4, 2) meta words), so a row of 576 streams 360 bytes, not 400. A slid weight is
//     this layout over K_prime; X is lifted to K_prime while quantized.
//   nm int8: as nm f32 with int8 codes and superchunks of S = lcm(group, 64): 64 K are one mask word
//     and the codes one vpexpandb places (6:8 streams 56 bytes per row and 64 K, dense 64).
//   int8 (every form): plus per-row scales and per-row sums of the int8 values (for the
//     unsigned-activation form of VNNI).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu/linear_kernels.h"
#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {

// What fixes a packed weight's layout: every size, stride and padding above follows from it.
struct RecordForm {
  WeightFormat kind = WeightFormat::Dense;
  DType dtype = DType::F32;  // F32, BF16 or I8
  int64_t rows = 0;
  int64_t K = 0;          // width of the stored rows (K_prime for a slid weight)
  Pattern pattern{2, 4};  // nm: the stored pattern
};
// The empty records of `form`, every packer's start: fields set and arrays zeroed, but for sparse24's
// meta words, which name positions (0, 1) in every group (allocate), or only sized
// (AlignedBytes::reserved) for checking stored records against (linear_records.h). An Error (naming
// `what`) for a shape, dtype or pattern the kernels cannot take.
Result<std::unique_ptr<PackedLinear>> record_layout(const RecordForm& form, bool allocate, const std::string& what);

// Dense weights: [rows_i, K] parts of one dtype stacked by rows. pack_dense copies them into rows of
// its own (f32 and bf16 keep their dtype; f16 is widened to f32, exactly); pack_dense_in_place reads
// f32 or bf16 parts where they are, copying nothing, and holds `owner` to keep their memory alive.
Result<std::unique_ptr<PackedLinear>> pack_dense(const std::vector<TensorView>& parts);
Result<std::unique_ptr<PackedLinear>> pack_dense_in_place(const std::vector<TensorView>& parts,
                                                          std::shared_ptr<const void> owner);
Result<std::unique_ptr<PackedLinear>> pack_sparse24(const Sparse24& weight);
Result<std::unique_ptr<PackedLinear>> pack_nm(const NMPacked& weight);

// INT8 (codes in [-127, 127] with per-row scales): dense rows zero-padded to K_x (K rounded up to 64),
// sparse24 records in K chunks of 128 (the last chunk may be 64 wide), or nm records; per-row scales
// and code sums.
// K above 65536 is an Error: the kernels' int32 sums of (code + 128) * code could overflow.
// Dense INT8 parts (one K) are stacked by rows, part 0's first.
Result<std::unique_ptr<PackedLinear>> pack_dense_int8(const std::vector<Quantized>& parts);
Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8(const QuantizedSparse24& weight);
// An nm weight's values quantized per row (`values`: codes [rows, groups * keep] and scales, as
// quantize_weights gives them for weight.values) in the nm records of an f32 weight, superchunks of
// lcm(group, 64) K: 64 K are one mask word and the codes that one vpexpandb places.
Result<std::unique_ptr<PackedLinear>> pack_nm_int8(const NMPacked& weight, const Quantized& values);

// The same INT8 nm and sparse24 records built a slice of rows at a time: `fill(row0, slice)` writes
// rows [row0, row0 + slice.rows()) of the weight into `slice` (zeroed, values in `dtype`, F32 or
// BF16), which is then quantized per row and placed. Slices are filled on the pool's threads, each
// by one thread, several at once: `fill` must be safe to call concurrently on different slices. Only one slice of about 2 MiB exists in the
// float form, and no codes tensor of the whole weight: a model pruned and quantized on load writes
// its records straight (docs/design.md 11.7). Byte for byte pack_nm_int8 / pack_sparse24_int8 of
// the whole weight, quantized as quantize_weights does. An Error of `fill` is returned as it is.
using NMSliceFill = std::function<Status(int64_t row0, NMPacked& slice)>;
using Sparse24SliceFill = std::function<Status(int64_t row0, Sparse24& slice)>;
Result<std::unique_ptr<PackedLinear>> pack_nm_int8_by_rows(int64_t rows, int64_t K, Pattern pattern, DType dtype,
                                                           const NMSliceFill& fill);
Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8_by_rows(int64_t rows, int64_t K, DType dtype,
                                                                 const Sparse24SliceFill& fill);

// Fills streamed_bytes from the packed arrays (values without slack, meta, int8 scales and sums).
void count_streamed_bytes(PackedLinear& packed);

}  // namespace nmkit::cpu
