// The gated feed-forward of a block (feed_forward.h).
#include "model/feed_forward.h"

#include "model/family.h"
#include "model/model_kernels.h"

namespace nmkit::model {

Status feed_forward(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n,
                    const LinearHook* hook) {
  static const std::vector<std::string> kGateUpNames = {"ffn_gate", "ffn_up"};
  static const std::vector<std::string> kDownNames = {"ffn_down"};
  const LlamaParams& p = m.params;
  const int64_t d = p.n_embd, ff = p.n_ff;
  norm_rows(s.x.data(), block.ffn_norm, n, d, p.rms_eps, s.xn.data());
  NMKIT_TRY(call_hook(hook, kGateUpNames, s.xn.data(), n, d));
  NMKIT_TRY(apply_group(block, b, kGroupGateUp, s.xn.data(), n, s.gate_up.data()));
  const auto gate = m.family->activation == Activation::GeluTanh ? geglu : swiglu;
  for_tokens(n, 16 * ff, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* gu = s.gate_up.data() + i * 2 * ff;  // gate rows first (llama_impl.h)
      gate(gu, gu + ff, ff, s.act.data() + i * ff);
    }
  });
  NMKIT_TRY(call_hook(hook, kDownNames, s.act.data(), n, ff));
  NMKIT_TRY(apply_group(block, b, kGroupDown, s.act.data(), n, s.tmp.data()));
  if (m.family->post_norms) norm_rows(s.tmp.data(), block.ffn_post_norm, n, d, p.rms_eps, s.tmp.data());
  add_rows(s.x.data(), s.tmp.data(), n, d);
  return ok_status();
}

}  // namespace nmkit::model
