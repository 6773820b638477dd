// The streaming read of the read-bandwidth probe (cpu/linear_kernels.h ReadStreamFn), 64 bytes a load
// as the AVX-512 kernels read weights.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {

uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  if (row_bytes == 0) {
    for (size_t i = 0; i < bytes; i += 256) {
      for (int j = 0; j < 4; ++j) acc[j] = _mm512_xor_si512(acc[j], _mm512_loadu_si512(p + i + 64 * static_cast<size_t>(j)));
    }
  } else {
    for (size_t block = 0; block < bytes; block += 4 * row_bytes) {
      for (size_t i = 0; i < row_bytes; i += 64) {
        for (int r = 0; r < 4; ++r) {
          acc[r] = _mm512_xor_si512(acc[r], _mm512_loadu_si512(p + block + static_cast<size_t>(r) * row_bytes + i));
        }
      }
    }
  }
  const __m512i all = _mm512_xor_si512(_mm512_xor_si512(acc[0], acc[1]), _mm512_xor_si512(acc[2], acc[3]));
  return static_cast<uint64_t>(_mm512_reduce_or_epi64(all)) ^ static_cast<uint64_t>(_mm512_reduce_add_epi64(all));
}

}  // namespace nmkit::cpu::avx512
