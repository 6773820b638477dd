#include "cuda/weight_padding.h"

#include <cstring>

#include "nmkit/status.h"

namespace nmkit::cuda {

Tensor pad_codes(const Tensor& codes, int64_t K_new, int64_t rows_new) {
  const int64_t rows = codes.rows(), K = codes.cols();
  NMKIT_ASSERT(K_new >= K && rows_new >= rows && dtype_size(codes.dtype()) == 1);
  Tensor out = Tensor::zeros(codes.dtype(), {rows_new, K_new});
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * K_new, codes.data() + r * K, static_cast<size_t>(K));
  }
  return out;
}

Sparse24 pad_sparse24(const Sparse24& s, int64_t K_new) {
  NMKIT_ASSERT(K_new >= s.K_pad() && K_new % 4 == 0);
  Sparse24 out;
  out.K = K_new;
  out.values = Tensor::zeros(s.dtype(), {s.rows(), K_new / 2});
  out.meta = Tensor::empty(DType::U8, {s.rows(), out.meta_stride()});
  std::memset(out.meta.data(), 0x44, out.meta.nbytes());
  const size_t es = dtype_size(s.dtype());
  const int64_t groups = s.K_pad() / 4;
  for (int64_t r = 0; r < s.rows(); ++r) {
    std::memcpy(out.values.data() + static_cast<size_t>(r * K_new / 2) * es,
                s.values.data() + static_cast<size_t>(r * groups * 2) * es, static_cast<size_t>(groups * 2) * es);
    uint8_t* meta = out.meta.as<uint8_t>() + r * out.meta_stride();
    std::memcpy(meta, s.meta.as<uint8_t>() + r * s.meta_stride(), static_cast<size_t>(s.meta_stride()));
    // An odd group count leaves half a byte: its high nibble (0 in sparse24) becomes a padding group.
    if (groups % 2 == 1) meta[groups / 2] = static_cast<uint8_t>((meta[groups / 2] & 0x0F) | 0x40);
  }
  return out;
}

}  // namespace nmkit::cuda
