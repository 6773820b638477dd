// Grouped-query causal attention of a block over the KV cache (attention.h), as the model's family
// states it (family.h).
#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/family.h"
#include "model/model_kernels.h"
#include "nmkit/threads.h"

namespace nmkit::model {
namespace {

// q, k and v of each token (rows of s.qkv): the family's biases and q/k norms, rope on q and k (the
// layer's angles, the family's mode), then k and v into the cache.
void rotate_and_store(const LlamaModel::Impl& m, const Block& block, const float* angles, Scratch& s, int64_t n,
                      const Positions& at, const KvLayer& kv) {
  const LlamaParams& p = m.params;
  const Family& family = *m.family;
  const int64_t hd = p.head_dim(), nh = p.n_head, nkv = p.n_head_kv;
  const int64_t qkv_width = (nh + 2 * nkv) * hd;
  const bool neox = family.rope == RopeMode::Neox;
  for_tokens(n, 4 * qkv_width, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = s.qkv.data() + i * qkv_width;
      if (family.qkv_bias) {
        const float* biases[3] = {block.q_bias.as<float>(), block.k_bias.as<float>(), block.v_bias.as<float>()};
        const int64_t widths[3] = {nh * hd, nkv * hd, nkv * hd};
        float* part = row;
        for (int k = 0; k < 3; part += widths[k], ++k) {
          for (int64_t e = 0; e < widths[k]; ++e) part[e] += biases[k][e];
        }
      }
      if (family.qk_norm) {  // each head normed over head_dim (llama.cpp's build_norm on [hd, heads])
        rms_norm_rows(row, block.attn_q_norm.as<float>(), nh, hd, p.rms_eps, row);
        rms_norm_rows(row + nh * hd, block.attn_k_norm.as<float>(), nkv, hd, p.rms_eps, row + nh * hd);
      }
      rope_rotate(row, nh + nkv, hd, hd, angles + i * hd, neox);  // q heads then k heads, contiguous
      const int64_t slot = at.slot(i);
      const float* k = row + nh * hd;
      const float* v = k + nkv * hd;
      for (int64_t g = 0; g < nkv; ++g) {
        float* kt = kv.k + g * hd * kv.stride + slot;
        for (int64_t e = 0; e < hd; ++e) kt[e * kv.stride] = k[g * hd + e];
        std::memcpy(kv.v + (g * kv.stride + slot) * hd, v + g * hd, static_cast<size_t>(hd) * sizeof(float));
      }
    }
  });
}

// s.att (n, n_head * head_dim) = each query head's attention over its cached positions.
// A local layer's query attends to the last `window` positions only (window 0: all); then a block
// of queries sharing loads would not share a first position, so each query is its own block where
// the window cuts the span.
void attend_all(const LlamaParams& p, Scratch& s, int64_t n, const Positions& at, const KvLayer& kv, int64_t window) {
  const int64_t hd = p.head_dim(), nh = p.n_head, nkv = p.n_head_kv;
  const int64_t qkv_width = (nh + 2 * nkv) * hd;
  const float scale = p.query_scale > 0 ? p.query_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  // Tasks: (block of up to `per_block` consecutive tokens of one sequence, kv head, chunk of at most
  // kMaxQueries of the group's query heads); the block's tokens times the chunk's heads are one
  // attend() call, whose queries share every load of the cached keys and values (SmolLM2: 4 tokens x
  // 3 heads = 12 queries, 12 sums in flight instead of 3).
  const int64_t group = nh / nkv;
  const int64_t heads = std::min<int64_t>(group, kMaxQueries);
  const int64_t chunks = (group + heads - 1) / heads;
  const int64_t span = at.seq_len > 0 ? at.seq_len : at.pos0 + n;  // longest attention of the call
  const bool windowed = window > 0 && span > window;
  const int64_t per_block = chunks == 1 && !windowed ? std::max<int64_t>(1, kMaxQueries / heads) : 1;
  const int64_t seq_tokens = at.seq_len > 0 ? at.seq_len : n;
  const int64_t seq_blocks = (seq_tokens + per_block - 1) / per_block;
  const int64_t blocks = n / seq_tokens * seq_blocks;
  const int64_t task_cost = std::max<int64_t>(1, span * hd * 4 * heads * std::min(per_block, seq_tokens));
  const int64_t grain = std::max<int64_t>(1, 65536 / task_cost);
  const int64_t tasks = blocks * nkv * chunks;
  auto attend_tasks = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> scores;
    const size_t need = static_cast<size_t>(span * kMaxQueries);
    if (scores.size() < need) scores.resize(need);
    for (int64_t t = t0; t < t1; ++t) {
      // Blocks in the order 0, last, 1, last-1, ...: a causal block costs in proportion to its
      // position, and parallel_for hands each thread a contiguous range of tasks, which this order
      // gives equal costs (in token order the last half of a prefill costs 3x the first).
      const int64_t k = t / (nkv * chunks), g = t / chunks % nkv, c = t % chunks;
      const int64_t block_index = k % 2 == 0 ? k / 2 : blocks - 1 - k / 2;
      const int64_t in_seq = block_index % seq_blocks;
      const int64_t i0 = block_index / seq_blocks * seq_tokens + in_seq * per_block;
      const int64_t count = std::min(per_block, seq_tokens - in_seq * per_block);
      const int64_t h0 = g * group + c * heads;
      const int64_t nh_chunk = std::min<int64_t>(heads, g * group + group - h0);
      const int64_t first = windowed ? std::max(at.first_slot(i0), at.slot(i0) - window + 1) : at.first_slot(i0);
      const float* q[kMaxQueries];
      float* out[kMaxQueries];
      int64_t n_pos[kMaxQueries];
      int nq = 0;
      for (int64_t i = i0; i < i0 + count; ++i) {
        for (int64_t e = 0; e < nh_chunk; ++e, ++nq) {
          q[nq] = s.qkv.data() + i * qkv_width + (h0 + e) * hd;
          out[nq] = s.att.data() + i * nh * hd + (h0 + e) * hd;
          n_pos[nq] = at.slot(i) - first + 1;
        }
      }
      attend(q, n_pos, nq, kv.k + g * hd * kv.stride + first, kv.stride, kv.v + (g * kv.stride + first) * hd, hd,
             scale, scores.data(), out);
    }
  };
  if (tasks <= grain) attend_tasks(0, tasks);
  else parallel_for(tasks, grain, attend_tasks);
}

}  // namespace

Status attention(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n,
                 const Positions& at, const KvLayer& kv, const LinearHook* hook) {
  static const std::vector<std::string> kQkvNames = {"attn_q", "attn_k", "attn_v"};
  static const std::vector<std::string> kOutputNames = {"attn_output"};
  const LlamaParams& p = m.params;
  const int64_t d = p.n_embd;
  const bool local = p.is_local(b);
  norm_rows(s.x.data(), block.attn_norm, n, d, p.rms_eps, s.xn.data());
  NMKIT_TRY(call_hook(hook, kQkvNames, s.xn.data(), n, d));
  NMKIT_TRY(apply_group(block, b, kGroupQkv, s.xn.data(), n, s.qkv.data()));
  rotate_and_store(m, block, (local ? s.cos_sin_local : s.cos_sin).data(), s, n, at, kv);
  attend_all(p, s, n, at, kv, local ? p.sliding_window : 0);
  NMKIT_TRY(call_hook(hook, kOutputNames, s.att.data(), n, p.n_head * p.head_dim()));
  NMKIT_TRY(apply_group(block, b, kGroupOutput, s.att.data(), n, s.tmp.data()));
  if (m.family->post_norms) norm_rows(s.tmp.data(), block.attn_post_norm, n, d, p.rms_eps, s.tmp.data());
  add_rows(s.x.data(), s.tmp.data(), n, d);
  return ok_status();
}

void compute_angles(const LlamaParams& p, int64_t n, const Positions& at, Scratch& s) {
  const int64_t hd = p.head_dim();
  const float* factors = p.rope_factors.empty() ? nullptr : p.rope_factors.data();
  const bool local = p.sliding_window > 0;
  for_tokens(n, (local ? 40 : 20) * hd, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      rope_angles(at.position(i), hd, p.rope_base, p.rope_scale, factors, s.cos_sin.data() + i * hd);
      // Local layers turn by their own base, unscaled (llama.cpp's rope_freq_base_train_swa and
      // rope_freq_scale_train_swa = 1).
      if (local) rope_angles(at.position(i), hd, p.rope_base_local, 1.0f, nullptr, s.cos_sin_local.data() + i * hd);
    }
  });
}

}  // namespace nmkit::model
