// Decompression of one row block into dense rows, for the compute-bound regime: the dense kernel runs
// on a 4-row tile, or oneDNN's GEMM on a panel of such blocks, and the decompression (a few operations
// per weight) is shared by all the tokens of a call (docs/design.md 8: a CPU can at best match dense
// there). Nothing is kept between calls: the tile or panel is the caller's scratch.
#include <cstring>
#include <vector>

#include "cpu/kernel_table.h"
#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"
#include "linear/linear_driver.h"

namespace nmkit::cpu {

namespace {

float to_f32(const PackedLinear& w, const std::byte* values, int64_t i) {
  if (w.dtype == DType::F32) {
    float v;
    std::memcpy(&v, values + i * 4, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, values + i * 2, 2);
  return bf16_to_f32(bits);
}

// Calls put(r, k, i) for every kept value of row block b of an nm weight: row r of the block, its
// column k, its index i in the packed values.
template <class Put>
void nm_rows(const PackedLinear& w, int64_t b, Put put) {
  const auto* mask = w.meta.as<uint8_t>();
  for (int64_t c = 0; c < w.K_x / w.superchunk; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const uint8_t* bits = mask + record * w.mask_stride;
      int64_t next = record * w.value_stride;
      for (int64_t k = 0; k < w.superchunk; ++k) {
        if ((bits[k >> 3] >> (k & 7)) & 1) put(r, c * w.superchunk + k, next++);
      }
    }
  }
}

// The 4 rows of block b over the packed width K_x (K_prime for a slid weight), f32 values of an
// f32/bf16 weight or int8 codes, row r at dst + r * ld: the portable decompression, or the tier's.
void packed_rows(const PackedLinear& w, int64_t b, void* dst, int64_t ld) {
  const LinearKernels& tier = kernels_for(w.tier).linear;
  if (w.dtype == DType::I8) {
    auto* out = static_cast<int8_t*>(dst);
    const TileI8Fn fast = w.kind == WeightFormat::Sparse24 ? tier.sparse24_i8_tile : tier.nm_i8_tile;
    if (fast != nullptr) return fast(w, b, out, ld);
    const auto* v = w.values.as<int8_t>();
    for (int r = 0; r < kLinearRowBlock; ++r) std::memset(out + r * ld, 0, static_cast<size_t>(w.K_x));
    if (w.kind == WeightFormat::NM) {
      nm_rows(w, b, [&](int r, int64_t k, int64_t i) { out[r * ld + k] = v[i]; });
      return;
    }
    NMKIT_ASSERT(w.kind == WeightFormat::Sparse24);
    const auto* meta = w.meta.as<uint32_t>();
    for (int64_t c = 0; c < int8_chunks(w.K_x); ++c) {
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const int64_t k = sparse24_int8_k(w, b, c, r);
        int8_t* row = out + r * ld + c * kLinearChunkInt8;
        for (int j = 0; j < int8_chunk_width(w.K_x, c) / 2; ++j) {
          row[32 * (j / 16) + sparse24_position(meta[k / 32 + j / 16], j % 16)] = v[k / 2 + j];
        }
      }
    }
    return;
  }
  auto* out = static_cast<float*>(dst);
  if (w.kind == WeightFormat::NM) {
    const TileFn fast = w.dtype == DType::F32 ? tier.nm_tile_f32 : tier.nm_tile_bf16;
    if (fast != nullptr) return fast(w, b, out, ld);
  }
  const std::byte* values = w.values.data.get();
  for (int r = 0; r < kLinearRowBlock; ++r) std::memset(out + r * ld, 0, static_cast<size_t>(w.K_x) * 4);
  switch (w.kind) {
    case WeightFormat::Dense: NMKIT_ASSERT(false); return;
    case WeightFormat::Sparse24: {
      const auto* meta = w.meta.as<uint32_t>();
      const int64_t chunks = w.K_x / kLinearChunk;
      for (int64_t c = 0; c < chunks; ++c) {
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const int64_t record = (b * chunks + c) * kLinearRowBlock + r;
          float* row = out + r * ld + c * kLinearChunk;
          for (int j = 0; j < 16; ++j) row[sparse24_position(meta[record], j)] = to_f32(w, values, record * 16 + j);
        }
      }
      return;
    }
    case WeightFormat::NM:
      nm_rows(w, b, [&](int r, int64_t k, int64_t i) { out[r * ld + k] = to_f32(w, values, i); });
      return;
  }
}

}  // namespace

void decompress_block(const PackedLinear& w, int64_t b, DType out, void* dst, int64_t ld) {
  const size_t size = dtype_size(out);
  NMKIT_ASSERT(w.dtype == DType::I8 ? out == DType::I8 : (out == DType::F32 || (out == DType::BF16 && w.dtype == DType::BF16)));
  auto* bytes = static_cast<std::byte*>(dst);
  if (w.kind == WeightFormat::Dense) {  // a copy (bf16 widened for an f32 tile), zero past K
    const int64_t K = w.dtype == DType::I8 ? w.K_x : w.K;
    for (int r = 0; r < kLinearRowBlock; ++r) {
      std::byte* row = bytes + static_cast<size_t>(r * ld) * size;
      const std::byte* src = dense_row<std::byte>(w, b * kLinearRowBlock + r);
      if (w.dtype == DType::BF16 && out == DType::F32) {  // widened exactly: the high halves
        const auto* from = reinterpret_cast<const uint16_t*>(src);
        auto* to = reinterpret_cast<uint32_t*>(row);
        for (int64_t k = 0; k < K; ++k) to[k] = uint32_t{from[k]} << 16;
      } else {
        std::memcpy(row, src, static_cast<size_t>(K) * size);
      }
      std::memset(row + static_cast<size_t>(K) * size, 0, static_cast<size_t>(w.K_x - K) * size);
    }
    return;
  }
  if (out != DType::BF16) return packed_rows(w, b, dst, ld);
  // bf16 rows of a bf16 weight: its f32 tile narrowed back (exact: the values came from bf16).
  thread_local std::vector<float> tile;
  tile.resize(static_cast<size_t>(kLinearRowBlock * w.K_x));
  packed_rows(w, b, tile.data(), w.K_x);
  for (int r = 0; r < kLinearRowBlock; ++r) {
    auto* row = reinterpret_cast<uint16_t*>(bytes + static_cast<size_t>(r * ld) * size);
    const float* from = tile.data() + r * w.K_x;
    for (int64_t k = 0; k < w.K_x; ++k) {
      uint32_t bits;
      std::memcpy(&bits, from + k, 4);
      row[k] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

LinearFn linear_kernel_for(const LinearKernels& kernels, WeightFormat kind, DType dtype) {
  switch (kind) {
    case WeightFormat::Dense:
      if (dtype == DType::F32) return kernels.dense_f32;
      if (dtype == DType::BF16) return kernels.dense_bf16;
      if (dtype == DType::I8) return kernels.dense_i8;
      return nullptr;
    case WeightFormat::Sparse24:
      if (dtype == DType::F32) return kernels.sparse24_f32;
      if (dtype == DType::BF16) return kernels.sparse24_bf16;
      if (dtype == DType::I8) return kernels.sparse24_i8;
      return nullptr;
    case WeightFormat::NM:
      if (dtype == DType::F32) return kernels.nm_f32;
      if (dtype == DType::BF16) return kernels.nm_bf16;
      if (dtype == DType::I8) return kernels.nm_i8;
      return nullptr;
  }
  return nullptr;
}

}  // namespace nmkit::cpu
