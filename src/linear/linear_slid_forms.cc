#include "linear/linear_slid_forms.h"

#include <cstring>

#include "cpu/kernel_table.h"
#include "linear/linear_pack.h"
#include "nmkit/slide.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {

bool nm_runs_slid(Pattern pattern, IsaTier tier, DType dtype, bool bf16_activations) {
  // bf16 weights with bf16 activations keep the nm records where the tier has their vdpbf16ps
  // kernel (faster than the slid form at every token count measured, docs/data.md).
  if (bf16_activations && dtype == DType::BF16 && kernels_for(tier).linear.nm_bf16x != nullptr) return false;
  // keep = 2N-2 fills every window; below it the 2:4 windows would store more slots than nm does.
  // Groups over 16 go to pack_nm, which refuses them.
  return tier >= IsaTier::Avx512 && pattern.group % 2 == 0 && pattern.group >= 6 && pattern.group <= 16 &&
         pattern.keep == pattern.group - 2;
}

Result<std::unique_ptr<PackedLinear>> pack_nm_as_slid(const NMPacked& weight) {
  NMKIT_TRY(validate(weight, "nm weight"));
  const Tensor dense = decompress(weight);
  auto slid = slide(dense.view(), weight.pattern, 32, "nm weight");
  if (!slid.ok()) return slid.error();
  auto windows = compress_sparse24(slid->weight.view(), "nm weight");
  if (!windows.ok()) return windows.error();
  auto packed = pack_sparse24(*windows);
  if (!packed.ok()) return packed.error();
  PackedLinear& w = **packed;
  w.slide = slid->geometry;
  w.K = weight.K;
  w.pattern = weight.pattern;
  for (int64_t source : lift_index_map(slid->geometry)) w.lift_source.push_back(static_cast<int32_t>(source));
  return packed;
}

void lift_token(const PackedLinear& w, const float* x, float* dst) {
  const int64_t lifted = static_cast<int64_t>(w.lift_source.size());
  for (int64_t j = 0; j < lifted; ++j) {
    const int32_t source = w.lift_source[static_cast<size_t>(j)];
    dst[j] = source >= 0 ? x[source] : 0.0f;
  }
  std::memset(dst + lifted, 0, static_cast<size_t>(w.K_x - lifted) * 4);
}

}  // namespace nmkit::cpu
