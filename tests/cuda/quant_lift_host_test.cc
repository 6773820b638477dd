// The CUDA quantize + lift kernel's row code (src/cuda/quant_lift_rows.h), built for the host, against
// the CPU quantizer (every ISA tier, through NMKIT_ISA) and the scalar reference, byte for byte:
// codes and scales, INT8 and E4M3, f32 and bf16 rows, plain and lifted (2:4, 4:6, 6:8, 14:16), by
// 4-byte words and by the group path (plain, 2:4 and 6:8), on awkward K, all-zero rows, rows whose
// inv is infinite, and values on rounding ties.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/quant_lift_rows.h"
#include "nmkit/quant.h"
#include "nmkit/slide_geometry.h"
#include "ref/quant_ref.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// The words [0, group_words * whole_groups) of a row by the kernel's group path (kIn inputs a group).
template <int kIn, class Src>
int64_t group_path_on_host(const Src* row, const cuda::LiftRows& shape, quant_rules::RowScale scale, uint8_t* out) {
  constexpr int kWords = kIn / 2 - 1;
  const int64_t groups = cuda::whole_groups<kIn>(shape);
  for (int64_t g = 0; g < groups; ++g) {
    uint32_t words[kWords];
    cuda::group_words<kIn>(row + g * kIn, shape.e4m3, scale, words);
    std::memcpy(out + 4 * g * kWords, words, sizeof(words));
  }
  return groups * kWords;
}

// The kernel's work for one row, done by `lanes` simulated threads in turn, as the block does it;
// with `groups`, the group path where the pattern has one (the kernel takes it for aligned rows).
template <class Src>
void gpu_rows_on_host(const Src* x, int64_t M, const cuda::LiftRows& shape, int lanes, bool groups,
                      std::vector<uint8_t>& codes, std::vector<float>& scales) {
  codes.assign(static_cast<size_t>(M * shape.cols), 0xAA);  // poison: every byte must be written
  scales.assign(static_cast<size_t>(M), -1.0f);
  for (int64_t m = 0; m < M; ++m) {
    const Src* row = x + m * shape.K;
    uint32_t bits = 0;
    for (int lane = 0; lane < lanes; ++lane) bits = std::max(bits, cuda::lane_abs_bits_max(row, 0, shape.K, lane, lanes));
    ASSERT_LT(bits, 0x7F800000u);
    const auto scale = quant_rules::row_scale(quant_rules::float_of(bits), shape.e4m3 ? 448.0f : 127.0f);
    scales[static_cast<size_t>(m)] = scale.scale;
    uint8_t* out = codes.data() + m * shape.cols;
    int64_t first_word = 0;
    if (groups && cuda::group_path_fits<8>(shape)) first_word = group_path_on_host<8>(row, shape, scale, out);
    if (groups && cuda::group_path_fits<4>(shape)) first_word = group_path_on_host<4>(row, shape, scale, out);
    for (int64_t t = first_word; t < shape.cols / 4; ++t) {
      const uint32_t word = cuda::code_word(row, shape, scale, t);
      std::memcpy(codes.data() + m * shape.cols + 4 * t, &word, 4);
    }
  }
}

// Rows of K values: random, then an all-zero row, a row of tiny values (absmax < 2^-121: inv is
// infinite), and a row of half-integers scaled so that x * inv lands on .5 ties.
Tensor test_rows(DType dtype, int64_t K, uint64_t seed) {
  std::vector<float> v = test::random_floats(static_cast<size_t>(6 * K), seed, -3.0f, 3.0f);
  for (int64_t k = 0; k < K; ++k) {
    v[static_cast<size_t>(3 * K + k)] = 0.0f;
    v[static_cast<size_t>(4 * K + k)] = (k % 3 == 0 ? -1.0f : 1.0f) * 1e-37f * static_cast<float>(k % 5);
    v[static_cast<size_t>(5 * K + k)] = static_cast<float>((k % 255) - 127) + 0.5f;
  }
  v[static_cast<size_t>(4 * K)] = 1e-37f;  // at least one non-zero tiny value
  v[static_cast<size_t>(5 * K)] = 127.0f;  // absmax 127: inv 1, so the .5 values are ties
  return Tensor::from_f32(v, {6, K}, dtype);
}

struct Case {
  int N;  // 0: plain quantization, else lifting of (2N-2):2N
  QuantType type;
  DType dtype;
};

TEST(QuantLiftHost, MatchesCpuQuantizerByteForByte) {
  const uint64_t seed = 27;
  SCOPED_TRACE(test::seed_trace(seed));
  int64_t nonzero_codes = 0;
  for (const int64_t K : test::awkward_sizes()) {
    for (const int N : {0, 2, 3, 4, 8}) {
      for (const QuantType type : {QuantType::Int8, QuantType::E4M3}) {
        for (const DType dtype : {DType::F32, DType::BF16}) {
          SCOPED_TRACE("K " + std::to_string(K) + " N " + std::to_string(N) + " " +
                       std::string(quant_type_name(type)) + " " + std::string(dtype_name(dtype)));
          const Tensor x = test_rows(dtype, K, seed + static_cast<uint64_t>(K));
          Result<Quantized> cpu = Error("unset");
          std::optional<SlideGeometry> geometry;
          cuda::LiftRows shape;
          shape.K = K;
          shape.e4m3 = type == QuantType::E4M3;
          if (N == 0) {
            cpu = quantize_tokens(x.view(), type);
            shape.real = K;
          } else {
            auto g = SlideGeometry::make(Pattern{2 * N - 2, 2 * N}, K);
            ASSERT_TRUE(g.ok()) << g.error().message();
            geometry = *g;
            cpu = quantize_lift(x.view(), *geometry, type);
            shape.real = geometry->K_prime_raw();
            shape.in_group = 2 * N;
            shape.out_group = 4 * (N - 1);
          }
          ASSERT_TRUE(cpu.ok()) << cpu.error().message();
          const Quantized ref = ref_quantize(x.view(), type, geometry ? &*geometry : nullptr);
          const int64_t cols = cpu->codes.cols();
          shape.cols = (cols + 3) / 4 * 4;  // the kernel writes whole words; the extra ones are zero
          for (const auto& [lanes, groups] : {std::pair{1, false}, {7, true}, {256, false}, {256, true}}) {
            SCOPED_TRACE(groups ? "group path" : "words");
            std::vector<uint8_t> codes;
            std::vector<float> scales;
            if (dtype == DType::F32) {
              gpu_rows_on_host(x.as<float>(), 6, shape, lanes, groups, codes, scales);
            } else {
              gpu_rows_on_host(x.as<uint16_t>(), 6, shape, lanes, groups, codes, scales);
            }
            for (int64_t m = 0; m < 6; ++m) {
              ASSERT_EQ(0, std::memcmp(&scales[static_cast<size_t>(m)], cpu->scales.as<float>() + m, 4)) << "row " << m;
              ASSERT_EQ(0, std::memcmp(&scales[static_cast<size_t>(m)], ref.scales.as<float>() + m, 4)) << "row " << m;
              for (int64_t j = 0; j < shape.cols; ++j) {
                const uint8_t got = codes[static_cast<size_t>(m * shape.cols + j)];
                const uint8_t want = j < cols ? cpu->codes.as<uint8_t>()[m * cols + j] : 0;
                ASSERT_EQ(got, want) << "row " << m << ", column " << j << ", lanes " << lanes;
                if (j < cols) {
                  ASSERT_EQ(got, ref.codes.as<uint8_t>()[m * cols + j]) << "row " << m << ", column " << j;
                }
                nonzero_codes += got != 0;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(nonzero_codes, 100000);  // the comparison saw real codes, not only padding
}

}  // namespace
}  // namespace nmkit
