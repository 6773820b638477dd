// What the pieces of the forward pass share (docs/design.md 11.2): the work buffers of a call, where
// each token of a call sits, the token-parallel loop, the row norm and a block linear's call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/llama_impl.h"

namespace nmkit::model {

// Work buffers of a forward call of up to `capacity` tokens; grown (never shrunk) on demand, so a
// decode loop allocates nothing.
struct Scratch {
  int64_t capacity = 0;
  std::vector<float> x, xn, qkv, att, tmp, gate_up, act, cos_sin, cos_sin_local;

  void reserve(const LlamaParams& p, int64_t n);
};

// Where token i of a call sits. One sequence continuing a cache (seq_len = 0): position and cache
// slot pos0 + i, attending to slots 0 .. pos0 + i. Calibration (seq_len > 0): n / seq_len sequences,
// each from position 0, token i in slot i of a cache as long as the call, attending to its own
// sequence's slots only.
struct Positions {
  int64_t pos0 = 0;
  int64_t seq_len = 0;
  int64_t position(int64_t i) const { return seq_len > 0 ? i % seq_len : pos0 + i; }
  int64_t slot(int64_t i) const { return seq_len > 0 ? i : pos0 + i; }
  int64_t first_slot(int64_t i) const { return seq_len > 0 ? i / seq_len * seq_len : 0; }
};

// Runs fn(begin, end) over n tokens, in parallel when each thread gets at least ~32k operations of
// `cost_per_token` (below that a hand-off costs more than it saves, as in decode).
void for_tokens(int64_t n, int64_t cost_per_token, const std::function<void(int64_t, int64_t)>& fn);

// y = rmsnorm(x) * weight over n rows of d.
void norm_rows(const float* x, const Tensor& weight, int64_t n, int64_t d, float eps, float* y);

// x += delta over n rows of d.
void add_rows(float* x, const float* delta, int64_t n, int64_t d);

// Shows a linear's input to the calibration hook, when there is one.
Status call_hook(const LinearHook* hook, const std::vector<std::string>& names, const float* x, int64_t n,
                 int64_t K);

// Runs linear group g of block b; an Error (a non-finite activation, say: docs/design.md section 8)
// names the block and the linear, so a user can tell which layer overflowed.
Status apply_group(const Block& block, int64_t b, int g, const float* x, int64_t n, float* y);

}  // namespace nmkit::model
