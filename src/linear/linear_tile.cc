// Decompression of one row block into the dense block layout, for the compute-bound regime: with
// many tokens per call the dense micro-kernel runs on the tile, and the decompression (a few scalar
// operations per weight) is shared by all of them (docs/design.md 8: a CPU can at best match dense there).
#include <cstring>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"
#include "linear/linear_driver.h"

namespace nmkit::cpu {

size_t tile_bytes(const PackedLinear& w) {
  const size_t size = w.dtype == DType::I8 ? 1 : 4;
  return static_cast<size_t>(w.K_x) * kLinearRowBlock * size;
}

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

}  // namespace

void decompress_block(const PackedLinear& w, int64_t b, void* tile) {
  if (w.kind != WeightFormat::Dense) std::memset(tile, 0, tile_bytes(w));
  const std::byte* values = w.values.data.get();
  if (w.dtype == DType::I8) {
    NMKIT_ASSERT(w.kind == WeightFormat::Sparse24);
    auto* out = static_cast<int8_t*>(tile);
    const auto* v = w.values.as<int8_t>();
    const auto* meta = w.meta.as<uint32_t>();
    for (int64_t c = 0; c < int8_chunks(w.K_x); ++c) {
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const int64_t k = sparse24_int8_k(w, b, c, r);
        int8_t* dst = out + int8_chunk_offset(w.K_x, c, r);
        for (int j = 0; j < int8_chunk_width(w.K_x, c) / 2; ++j) {
          dst[32 * (j / 16) + sparse24_position(meta[k / 32 + j / 16], j % 16)] = v[k / 2 + j];
        }
      }
    }
    return;
  }
  auto* out = static_cast<float*>(tile);
  const int64_t chunks = w.K_x / kLinearChunk;
  switch (w.kind) {
    case WeightFormat::Dense: {  // bf16 widened once instead of once per group of tokens
      NMKIT_ASSERT(w.dtype == DType::BF16);
      const uint16_t* src = w.values.as<uint16_t>() + b * chunks * kLinearRowBlock * kLinearChunk;
      auto* dst = static_cast<uint32_t*>(tile);
      for (int64_t i = 0; i < chunks * kLinearRowBlock * kLinearChunk; ++i) dst[i] = uint32_t{src[i]} << 16;
      return;
    }
    case WeightFormat::Sparse24: {
      const auto* meta = w.meta.as<uint32_t>();
      for (int64_t c = 0; c < chunks; ++c) {
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const int64_t record = (b * chunks + c) * kLinearRowBlock + r;
          float* dst = out + (c * kLinearRowBlock + r) * kLinearChunk;
          for (int j = 0; j < 16; ++j) dst[sparse24_position(meta[record], j)] = to_f32(w, values, record * 16 + j);
        }
      }
      return;
    }
    case WeightFormat::NM: {
      const auto* mask = w.meta.as<uint8_t>();
      const int64_t superchunks = w.K_x / w.superchunk;
      for (int64_t c = 0; c < superchunks; ++c) {
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const int64_t record = nm_record(w, b, c, r);
          const uint8_t* bits = mask + record * w.mask_stride;
          int64_t next = record * w.value_stride;
          for (int64_t k = 0; k < w.superchunk; ++k) {
            if ((bits[k >> 3] >> (k & 7)) & 1) {
              const int64_t kk = c * w.superchunk + k;
              out[(kk / kLinearChunk * kLinearRowBlock + r) * kLinearChunk + kk % kLinearChunk] = to_f32(w, values, next++);
            }
          }
        }
      }
      return;
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
      return nullptr;
  }
  return nullptr;
}

}  // namespace nmkit::cpu
