// The streaming read of the read-bandwidth probe (cpu/linear_kernels.h ReadStreamFn), 32 bytes a load
// as the AVX2 kernels read weights.
#include <immintrin.h>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx2 {

uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  auto load = [](const std::byte* at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)); };
  if (row_bytes == 0) {
    for (size_t i = 0; i < bytes; i += 128) {
      for (int j = 0; j < 4; ++j) acc[j] = _mm256_xor_si256(acc[j], load(p + i + 32 * static_cast<size_t>(j)));
    }
  } else {
    for (size_t block = 0; block < bytes; block += 4 * row_bytes) {
      for (size_t i = 0; i < row_bytes; i += 32) {
        for (int r = 0; r < 4; ++r) {
          acc[r] = _mm256_xor_si256(acc[r], load(p + block + static_cast<size_t>(r) * row_bytes + i));
        }
      }
    }
  }
  const __m256i all = _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
  const __m128i half = _mm_xor_si128(_mm256_castsi256_si128(all), _mm256_extracti128_si256(all, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(half)) ^ static_cast<uint64_t>(_mm_extract_epi64(half, 1));
}

}  // namespace nmkit::cpu::avx2
