// Fills the quantization slots per tier, builds the lifting gather tables, and holds the baseline
// helpers that every tier may call (compiled without tier flags).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>

#include "cpu/kernel_table.h"
#include "quant/quant_rules.h"

namespace nmkit::cpu {
namespace {

using quant_rules::lifted_source;

struct PhaseStorage {
  std::vector<int64_t> base;
  std::vector<uint8_t> index;
};

LiftPhases build_phases(int width, int64_t in_group, int64_t out_group, PhaseStorage& storage) {
  int64_t a = width, b = out_group;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  LiftPhases phases;
  phases.width = width;
  phases.count = static_cast<int>(out_group / a);
  phases.in_advance = static_cast<int64_t>(phases.count) * width / out_group * in_group;
  storage.base.resize(static_cast<size_t>(phases.count));
  storage.index.resize(static_cast<size_t>(phases.count) * static_cast<size_t>(width));
  for (int v = 0; v < phases.count; ++v) {
    const int64_t j0 = static_cast<int64_t>(v) * width;
    int64_t low = lifted_source(j0, in_group, out_group);
    for (int t = 0; t < width; ++t) low = std::min(low, lifted_source(j0 + t, in_group, out_group));
    storage.base[static_cast<size_t>(v)] = low;
    for (int t = 0; t < width; ++t) {
      const int64_t offset = lifted_source(j0 + t, in_group, out_group) - low;
      // The one-load shuffle needs every source inside the loaded vector (see LiftPhases).
      NMKIT_ASSERT(offset >= 0 && offset < width);
      storage.index[static_cast<size_t>(v) * static_cast<size_t>(width) + static_cast<size_t>(t)] =
          static_cast<uint8_t>(offset);
    }
  }
  phases.base = storage.base.data();
  phases.index = storage.index.data();
  return phases;
}

}  // namespace

const LiftTable& lift_table(int N) {
  NMKIT_ASSERT(N >= 2 && N <= Pattern::kMaxGroup / 2);
  struct Entry {
    std::once_flag built;
    LiftTable table;
    PhaseStorage s16, s64;
  };
  static std::array<Entry, Pattern::kMaxGroup / 2 + 1> entries;
  Entry& entry = entries[static_cast<size_t>(N)];
  std::call_once(entry.built, [&] {
    LiftTable& t = entry.table;
    t.N = N;
    t.in_group = 2 * N;
    t.out_group = 4 * (N - 1);
    t.v16 = build_phases(16, t.in_group, t.out_group, entry.s16);
    t.v64 = build_phases(64, t.in_group, t.out_group, entry.s64);
  });
  return entry.table;
}

int64_t quant_codes_bytes(const LiftTable* table, int64_t K, int64_t cols) {
  // A 64-byte load at any of cols output columns (a plain copy reads codes [0, cols + 64)).
  const int64_t copy = std::max(K, cols) + 128;
  if (table == nullptr) return copy;
  // A gather vector starting at output column j0 loads from at most lifted_source(j0) <=
  // (j0 / out_group + 1) * in_group, 64 bytes on.
  const int64_t reach = (cols / table->out_group + 2) * table->in_group + 128;
  return std::max(reach, copy);
}

namespace {
int64_t round_up_64(int64_t bytes) { return (bytes + 63) / 64 * 64; }
}  // namespace

int64_t quant_codes_offset(const LiftTable* table, int64_t K, int64_t cols, int buffer) {
  return buffer * round_up_64(quant_codes_bytes(table, K, cols));
}

int64_t quant_staging_offset(const LiftTable* table, int64_t K, int64_t cols, int buffer) {
  return 2 * round_up_64(quant_codes_bytes(table, K, cols)) + buffer * round_up_64(cols + 64);
}

int64_t quant_scratch_bytes(const LiftTable* table, int64_t K, int64_t cols) {
  return quant_staging_offset(table, K, cols, 2);
}

float abs_bits_to_f32(DType dtype, uint32_t bits) {
  if (dtype == DType::F32) {
    float value;
    std::memcpy(&value, &bits, 4);
    return value;
  }
  return dtype == DType::BF16 ? bf16_to_f32(static_cast<uint16_t>(bits))
                              : f16_to_f32(static_cast<uint16_t>(bits));
}

uint32_t nonfinite_abs_bits(DType dtype) {
  return dtype == DType::F32 ? 0x7F800000u : (dtype == DType::BF16 ? 0x7F80u : 0x7C00u);
}

uint8_t quantize_value(QuantType type, float product) {
  return quant_rules::code_of(type == QuantType::E4M3, product);
}

void quantize_row_values(const QuantRowsArgs& args, const std::byte* src_row, float inv,
                         uint8_t* dst) {
  const size_t size = dtype_size(args.src_dtype);
  for (int64_t k = 0; k < args.K; ++k) {
    float x;
    convert_to_f32(args.src_dtype, src_row + static_cast<size_t>(k) * size, &x, 1);
    dst[k] = quantize_value(args.type, x * inv);
  }
}

void gather_lifted_row(const QuantRowsArgs& args, const uint8_t* codes, uint8_t* dst) {
  const LiftTable& t = *args.lift;
  for (int64_t j = 0; j < args.cols; ++j) {
    const int64_t i = lifted_source(j, t.in_group, t.out_group);
    dst[j] = i < args.K ? codes[i] : 0;
  }
}

void fill_quant_kernels(IsaTier tier, QuantKernels& slots) {
  switch (tier) {
    case IsaTier::Scalar:
      slots.quantize_rows = scalar::quantize_rows;
      break;
    case IsaTier::Avx2:
      slots.quantize_rows = avx2::quantize_rows;
      break;
    case IsaTier::Avx512:
      slots.quantize_rows = avx512::quantize_rows;
      break;
  }
}

}  // namespace nmkit::cpu
