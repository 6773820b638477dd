// Quantized linear layer by the letter of docs/design.md section 6 (see include/nmkit/quant_linear.h).
#include "nmkit/quant_linear.h"

#include <string>
#include <vector>

namespace nmkit {
namespace {

// Local spellings: nmkit_ref links only core and format, not the quant module.
DType code_dtype(QuantType type) { return type == QuantType::Int8 ? DType::I8 : DType::F8_E4M3; }
std::string type_name(QuantType type) { return type == QuantType::Int8 ? "int8" : "e4m3"; }

Status check_codes(const Quantized& q, const char* what) {
  if (q.codes.shape().size() != 2 || q.codes.dtype() != code_dtype(q.type)) {
    return Error(std::string(what) + ": codes must be a 2-D " +
                 std::string(dtype_name(code_dtype(q.type))) + " tensor, got " +
                 std::string(dtype_name(q.codes.dtype())) + " " + shape_str(q.codes.shape()));
  }
  if (q.scales.dtype() != DType::F32 || q.scales.shape() != Shape{q.codes.rows()}) {
    return Error(std::string(what) + ": scales must be F32 [" + std::to_string(q.codes.rows()) +
                 "], got " + std::string(dtype_name(q.scales.dtype())) + " " +
                 shape_str(q.scales.shape()));
  }
  return ok_status();
}

Status check_pair(const Quantized& x, QuantType w_type, int64_t w_K) {
  NMKIT_TRY(check_codes(x, "x"));
  if (x.type != w_type) {
    return Error("quantized linear: x is " + type_name(x.type) + " but w is " +
                 type_name(w_type));
  }
  if (x.codes.cols() != w_K) {
    return Error("quantized linear: x has K = " + std::to_string(x.codes.cols()) +
                 " but w has K = " + std::to_string(w_K));
  }
  return ok_status();
}

// One (row of x, row of w) pair accumulated over the given k positions and weight codes.
struct Accumulator {
  QuantType type;
  int32_t i = 0;
  float f = 0.0f;
  void add(uint8_t xc, uint8_t wc) {
    if (type == QuantType::Int8) {
      i += static_cast<int32_t>(static_cast<int8_t>(xc)) * static_cast<int32_t>(static_cast<int8_t>(wc));
    } else {
      f += e4m3_to_f32(xc) * e4m3_to_f32(wc);
    }
  }
};

Tensor make_acc(QuantType type, int64_t M, int64_t rows) {
  return Tensor::empty(type == QuantType::Int8 ? DType::I32 : DType::F32, {M, rows});
}

void store(Tensor& acc, int64_t index, const Accumulator& a) {
  if (a.type == QuantType::Int8) {
    acc.as<int32_t>()[index] = a.i;
  } else {
    acc.as<float>()[index] = a.f;
  }
}

Result<Tensor> finish(const Quantized& x, const Tensor& acc, const Tensor& w_scales,
                      const TensorView* bias) {
  const int64_t M = acc.rows(), rows = acc.cols();
  std::vector<float> b;
  if (bias != nullptr) {
    if (bias->shape != Shape{rows} || !is_prunable(bias->dtype)) {
      return Error("quantized linear: bias must be [" + std::to_string(rows) +
                   "] of F32, F16 or BF16, got " + std::string(dtype_name(bias->dtype)) + " " +
                   shape_str(bias->shape));
    }
    b = to_f32(*bias);
  }
  Tensor y = Tensor::empty(DType::F32, {M, rows});
  const float* sx = x.scales.as<float>();
  const float* sw = w_scales.as<float>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t index = m * rows + r;
      const float sum = x.type == QuantType::Int8 ? static_cast<float>(acc.as<int32_t>()[index])
                                                  : acc.as<float>()[index];
      float value = (sx[m] * sw[r]) * sum;
      if (bias != nullptr) value += b[static_cast<size_t>(r)];
      y.as<float>()[index] = value;
    }
  }
  return y;
}

}  // namespace

Result<Tensor> ref_quant_accumulate(const Quantized& x, const Quantized& w) {
  NMKIT_TRY(check_codes(w, "w"));
  NMKIT_TRY(check_pair(x, w.type, w.codes.cols()));
  const int64_t M = x.codes.rows(), rows = w.codes.rows(), K = w.codes.cols();
  const auto* xc = x.codes.as<uint8_t>();
  const auto* wc = w.codes.as<uint8_t>();
  Tensor acc = make_acc(x.type, M, rows);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      Accumulator a{x.type};
      for (int64_t k = 0; k < K; ++k) a.add(xc[m * K + k], wc[r * K + k]);
      store(acc, m * rows + r, a);
    }
  }
  return acc;
}

Result<Tensor> ref_quant_accumulate(const Quantized& x, const QuantizedSparse24& w) {
  const Sparse24& p = w.packed;
  if (p.dtype() != code_dtype(w.type) || p.values.dtype() != p.dtype() ||
      p.values.shape() != Shape{p.rows(), p.K_pad() / 2} || p.meta.shape() != Shape{p.rows(), p.meta_stride()} ||
      w.scales.dtype() != DType::F32 || w.scales.shape() != Shape{p.rows()}) {
    return Error("w: quantized sparse24 with inconsistent values " + shape_str(p.values.shape()) +
                 ", meta " + shape_str(p.meta.shape()) + " or scales " + shape_str(w.scales.shape()) +
                 " for [" + std::to_string(p.rows()) + ", " + std::to_string(p.K) + "]");
  }
  NMKIT_TRY(check_pair(x, w.type, p.K));
  const int64_t M = x.codes.rows(), rows = p.rows(), K = p.K;
  const int64_t groups = p.K_pad() / 4;
  const auto* xc = x.codes.as<uint8_t>();
  const auto* values = p.values.as<uint8_t>();
  const auto* meta = p.meta.as<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int nibble = (meta[r * p.meta_stride() + g / 2] >> (4 * (g % 2))) & 0xF;
      if ((nibble & 3) >= (nibble >> 2)) {
        return Error("w: row " + std::to_string(r) + ", group " + std::to_string(g) +
                     ": invalid metadata nibble " + std::to_string(nibble));
      }
    }
  }
  Tensor acc = make_acc(x.type, M, rows);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      Accumulator a{x.type};
      for (int64_t g = 0; g < groups; ++g) {
        const int nibble = (meta[r * p.meta_stride() + g / 2] >> (4 * (g % 2))) & 0xF;
        const int64_t k0 = 4 * g + (nibble & 3), k1 = 4 * g + (nibble >> 2);
        const uint8_t* v = values + r * (p.K_pad() / 2) + 2 * g;
        if (k0 < K) a.add(xc[m * K + k0], v[0]);  // padding slots have no column of x
        if (k1 < K) a.add(xc[m * K + k1], v[1]);
      }
      store(acc, m * rows + r, a);
    }
  }
  return acc;
}

Result<Tensor> ref_quant_linear(const Quantized& x, const Quantized& w, const TensorView* bias) {
  auto acc = ref_quant_accumulate(x, w);
  if (!acc.ok()) return acc.error();
  return finish(x, *acc, w.scales, bias);
}

Result<Tensor> ref_quant_linear(const Quantized& x, const QuantizedSparse24& w, const TensorView* bias) {
  auto acc = ref_quant_accumulate(x, w);
  if (!acc.ok()) return acc.error();
  return finish(x, *acc, w.scales, bias);
}

}  // namespace nmkit
