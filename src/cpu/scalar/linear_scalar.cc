// Portable linear kernels on the packed layouts of include/nmkit/linear.h: the fallback tier, and
// the shape every SIMD tier follows. Sums use 16 partial accumulators per output (one per value
// slot of a chunk), so no product passes through more than K/16 + 5 roundings; the tests' tolerance
// is derived from that bound (tests/linear/tolerance.h).
#include <cstring>

#include "cpu/linear_kernels.h"
#include "cpu/linear_common.h"

namespace nmkit::cpu::scalar {
namespace {

inline float load_value(const float* p) { return *p; }
inline float load_value(const uint16_t* p) { return bf16_to_f32(*p); }

// Pairwise sum of 16 partials.
inline float reduce16(float* s) {
  for (int width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) s[i] += s[i + width];
  }
  return s[0];
}

// Dense rows (cpu/linear_common.h block_rows) in steps of 32 K; the rows' last step stops at their end.
template <class T>
void dense(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const auto* x = static_cast<const float*>(call.x);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    const T* rows[kLinearRowBlock];
    block_rows(call, b, rows);
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        const float* xm = x + m * ldx;
        float s[16] = {};
        for (int64_t k = 0; k < width; k += kLinearChunk) {
          const int64_t n = width - k < kLinearChunk ? width - k : kLinearChunk;
          for (int j = 0; j < 16; ++j) {
            const float lo = j < n ? load_value(rows[r] + k + j) * xm[k + j] : 0.0f;
            const float hi = j + 16 < n ? load_value(rows[r] + k + j + 16) * xm[k + j + 16] : 0.0f;
            s[j] += lo + hi;
          }
        }
        store_output(call, m, row, reduce16(s));
      }
    }
  }
}

template <class T>
void sparse24(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = w.K_x / kLinearChunk;
  const auto* values = w.values.as<T>();
  const auto* meta = w.meta.as<uint32_t>();
  const auto* x = static_cast<const float*>(call.x);
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        const float* xm = x + m * w.K_x;
        float s[16] = {};
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t record = (b * chunks + c) * kLinearRowBlock + r;
          const T* wr = values + record * 16;
          const uint32_t word = meta[record];
          const float* xc = xm + c * kLinearChunk;
          for (int j = 0; j < 16; ++j) {
            s[j] += load_value(wr + j) * xc[sparse24_position(word, j)];
          }
        }
        store_output(call, m, row, reduce16(s));
      }
    }
  }
}

template <class T>
void nm(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const auto* values = w.values.as<T>();
  const auto* mask = w.meta.as<uint8_t>();
  const auto* x = static_cast<const float*>(call.x);
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        const float* xm = x + m * w.K_x;
        float s[16] = {};
        for (int64_t c = 0; c < superchunks; ++c) {
          const int64_t record = nm_record(w, b, c, r);
          const T* v = values + record * w.value_stride;
          const uint8_t* bits = mask + record * w.mask_stride;
          for (int64_t k = 0; k < w.superchunk; ++k) {
            if ((bits[k >> 3] >> (k & 7)) & 1) s[k & 15] += load_value(v++) * xm[c * w.superchunk + k];
          }
        }
        store_output(call, m, row, reduce16(s));
      }
    }
  }
}

// INT8: exact int32 sums, so the order is free. Dense rows or a tile (cpu/linear_common.h block_rows).
void dense_i8(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const auto* x = static_cast<const int8_t*>(call.x);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    const int8_t* rows[kLinearRowBlock];
    block_rows(call, b, rows);
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        int32_t acc = 0;
        for (int64_t k = 0; k < width; ++k) acc += int32_t{rows[r][k]} * int32_t{x[m * ldx + k]};
        store_output(call, m, row, int8_output(call, m, row, acc));
      }
    }
  }
}

// Records of 128 K (64 values, four meta words); the last of 64 K (32 values, two words) when K_x
// is an odd multiple of 64.
void sparse24_i8(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = int8_chunks(w.K_x);
  const auto* values = w.values.as<int8_t>();
  const auto* meta = w.meta.as<uint32_t>();
  const auto* x = static_cast<const int8_t*>(call.x);
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        int32_t acc = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t k = sparse24_int8_k(w, b, c, r);
          const int8_t* xc = x + m * w.K_x + c * kLinearChunkInt8;
          for (int j = 0; j < int8_chunk_width(w.K_x, c) / 2; ++j) {
            const int position = 32 * (j / 16) + sparse24_position(meta[k / 32 + j / 16], j % 16);
            acc += int32_t{values[k / 2 + j]} * int32_t{xc[position]};
          }
        }
        store_output(call, m, row, int8_output(call, m, row, acc));
      }
    }
  }
}

// INT8 nm records (any keep:group): each set mask bit takes the row's next code.
void nm_i8(const LinearCall& call) {
  const PackedLinear& w = *call.w;
  const auto* values = w.values.as<int8_t>();
  const auto* mask = w.meta.as<uint8_t>();
  const auto* x = static_cast<const int8_t*>(call.x);
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= w.rows) break;
      for (int64_t m = 0; m < call.M; ++m) {
        int32_t acc = 0;
        for (int64_t c = 0; c < superchunks; ++c) {
          const int64_t record = nm_record(w, b, c, r);
          const int8_t* v = values + record * w.value_stride;
          const uint8_t* bits = mask + record * w.mask_stride;
          const int8_t* xc = x + m * w.K_x + c * w.superchunk;
          for (int64_t k = 0; k < w.superchunk; ++k) {
            if ((bits[k >> 3] >> (k & 7)) & 1) acc += int32_t{*v++} * int32_t{xc[k]};
          }
        }
        store_output(call, m, row, int8_output(call, m, row, acc));
      }
    }
  }
}

}  // namespace

void fill_linear(LinearKernels& slots) {
  slots.dense_f32 = dense<float>;
  slots.dense_bf16 = dense<uint16_t>;
  slots.sparse24_f32 = sparse24<float>;
  slots.sparse24_bf16 = sparse24<uint16_t>;
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
  slots.dense_i8 = dense_i8;
  slots.sparse24_i8 = sparse24_i8;
  slots.nm_i8 = nm_i8;
}

}  // namespace nmkit::cpu::scalar
