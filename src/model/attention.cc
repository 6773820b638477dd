// Grouped-query causal attention of a llama block over the KV cache (attention.h).
#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/model_kernels.h"
#include "nmkit/threads.h"

namespace nmkit::model {
namespace {

// q, k and v of each token (rows of s.qkv): rope on q and k, then k and v into the cache.
void rotate_and_store(const LlamaParams& p, Scratch& s, int64_t n, const Positions& at, const KvLayer& kv) {
  const int64_t hd = p.head_dim(), nh = p.n_head, nkv = p.n_head_kv;
  const int64_t qkv_width = (nh + 2 * nkv) * hd;
  for_tokens(n, 4 * qkv_width, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = s.qkv.data() + i * qkv_width;
      const float* cs = s.cos_sin.data() + i * hd;
      rope_rotate(row, nh + nkv, hd, hd, cs);  // q heads then k heads, contiguous
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
void attend_all(const LlamaParams& p, Scratch& s, int64_t n, const Positions& at, const KvLayer& kv) {
  const int64_t hd = p.head_dim(), nh = p.n_head, nkv = p.n_head_kv;
  const int64_t qkv_width = (nh + 2 * nkv) * hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  // Tasks: (block of up to `per_block` consecutive tokens of one sequence, kv head, chunk of at most
  // kMaxQueries of the group's query heads); the block's tokens times the chunk's heads are one
  // attend() call, whose queries share every load of the cached keys and values (SmolLM2: 4 tokens x
  // 3 heads = 12 queries, 12 sums in flight instead of 3).
  const int64_t group = nh / nkv;
  const int64_t heads = std::min<int64_t>(group, kMaxQueries);
  const int64_t chunks = (group + heads - 1) / heads;
  const int64_t per_block = chunks == 1 ? std::max<int64_t>(1, kMaxQueries / heads) : 1;
  const int64_t seq_tokens = at.seq_len > 0 ? at.seq_len : n;
  const int64_t seq_blocks = (seq_tokens + per_block - 1) / per_block;
  const int64_t blocks = n / seq_tokens * seq_blocks;
  const int64_t span = at.seq_len > 0 ? at.seq_len : at.pos0 + n;  // longest attention of the call
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
      const int64_t first = at.first_slot(i0);
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
  norm_rows(s.x.data(), block.attn_norm, n, d, p.rms_eps, s.xn.data());
  NMKIT_TRY(call_hook(hook, kQkvNames, s.xn.data(), n, d));
  NMKIT_TRY(apply_group(block, b, kGroupQkv, s.xn.data(), n, s.qkv.data()));
  rotate_and_store(p, s, n, at, kv);
  attend_all(p, s, n, at, kv);
  NMKIT_TRY(call_hook(hook, kOutputNames, s.att.data(), n, p.n_head * p.head_dim()));
  NMKIT_TRY(apply_group(block, b, kGroupOutput, s.att.data(), n, s.tmp.data()));
  add_rows(s.x.data(), s.tmp.data(), n, d);
  return ok_status();
}

void compute_angles(const LlamaParams& p, int64_t n, const Positions& at, Scratch& s) {
  const int64_t hd = p.head_dim();
  for_tokens(n, 20 * hd, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) rope_angles(at.position(i), hd, p.rope_base, s.cos_sin.data() + i * hd);
  });
}

}  // namespace nmkit::model
