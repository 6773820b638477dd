#include <cstring>
#include <unordered_map>
#include <vector>

#include "linear_baselines.h"

#if NMKIT_HAVE_ONEDNN
#include <dnnl.hpp>

#include "linear/onednn_matmul.h"  // onednn_tier(): the same ISA cap as the library's oneDNN calls
#endif

namespace nmkit::bench {

#if NMKIT_HAVE_ONEDNN
bool have_onednn() { return true; }

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

class Impl final : public OneDnnLinear {
 public:
  Impl(const std::string& type, bool plain, int64_t M, int64_t rows, int64_t K, const float* w_f32,
       const int8_t* w_i8, const float* w_scales)
      : eng_((linear::onednn_tier(), dnnl::engine::kind::cpu), 0), stream_(eng_), int8_(type == "int8"), rows_(rows) {
    const dt src_type = type == "f32" ? dt::f32 : type == "bf16" ? dt::bf16 : dt::s8;
    const dt wei_type = type == "f32" ? dt::f32 : type == "bf16" ? dt::bf16 : dt::s8;
    const dnnl::memory::desc src_md({M, K}, src_type, tag::ab);
    // "any" lets oneDNN reorder W into its blocked layout (brgemm); the plain layout keeps W as given
    // (oneDNN then picks its gemm/gemv path, which can be faster for a single token).
    const dnnl::memory::desc wei_any({K, rows}, wei_type, plain ? tag::ba : tag::any);
    const dnnl::memory::desc dst_md({M, rows}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (int8_) attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});  // one scale per output column
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), attr, eng_);
    // The user's W [rows, K] row-major is the K x rows matrix B in layout "ba".
    const dnnl::memory::desc user_md({K, rows}, wei_type, tag::ba);
    std::vector<uint16_t> bf16;
    void* user_ptr = nullptr;
    std::vector<float> f32_copy;
    if (type == "f32") {
      f32_copy.assign(w_f32, w_f32 + rows * K);
      user_ptr = f32_copy.data();
    } else if (type == "bf16") {
      bf16.resize(static_cast<size_t>(rows * K));
      for (size_t i = 0; i < bf16.size(); ++i) {  // exact: the values are bf16 already
        uint32_t bits;
        std::memcpy(&bits, w_f32 + i, 4);
        bf16[i] = static_cast<uint16_t>(bits >> 16);
      }
      user_ptr = bf16.data();
    } else {
      user_ptr = const_cast<int8_t*>(w_i8);
      w_scales_.assign(w_scales, w_scales + rows);
      scales_.resize(static_cast<size_t>(rows));
    }
    dnnl::memory user(user_md, eng_, user_ptr);
    weights_ = dnnl::memory(pd.weights_desc(), eng_);
    dnnl::reorder(user, weights_).execute(stream_, user, weights_);
    stream_.wait();
    weight_bytes_ = pd.weights_desc().get_size();
    src_ = dnnl::memory(pd.src_desc(), eng_, nullptr);
    dst_ = dnnl::memory(pd.dst_desc(), eng_, nullptr);
    if (int8_) scale_mem_ = dnnl::memory({{rows}, dt::f32, tag::a}, eng_, scales_.data());
    matmul_ = dnnl::matmul(pd);
  }

  void run(const void* x, float x_scale, float* y) override {
    src_.set_data_handle(const_cast<void*>(x));
    dst_.set_data_handle(y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}};
    if (int8_) {
      for (size_t r = 0; r < scales_.size(); ++r) scales_[r] = x_scale * w_scales_[r];
      args.insert({DNNL_ARG_ATTR_OUTPUT_SCALES, scale_mem_});
    }
    matmul_.execute(stream_, args);
    stream_.wait();
  }

  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  dnnl::engine eng_;
  dnnl::stream stream_;
  bool int8_;
  int64_t rows_;
  dnnl::memory weights_, src_, dst_, scale_mem_;
  dnnl::matmul matmul_;
  std::vector<float> w_scales_, scales_;
  size_t weight_bytes_ = 0;
};

}  // namespace

std::unique_ptr<OneDnnLinear> OneDnnLinear::make(const std::string& type, bool plain, int64_t M, int64_t rows,
                                                 int64_t K, const float* w_f32, const int8_t* w_i8,
                                                 const float* w_scales) {
  try {
    return std::make_unique<Impl>(type, plain, M, rows, K, w_f32, w_i8, w_scales);
  } catch (const dnnl::error&) {
    return nullptr;  // this type is not implemented on this machine
  }
}
#else
bool have_onednn() { return false; }
std::unique_ptr<OneDnnLinear> OneDnnLinear::make(const std::string&, bool, int64_t, int64_t, int64_t, const float*,
                                                 const int8_t*, const float*) {
  return nullptr;
}
#endif

}  // namespace nmkit::bench
