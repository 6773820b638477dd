// Next-token sampling for `nmkit generate`: greedy (the default), or temperature with optional
// top-k and top-p, drawn from a seeded std::mt19937_64 so a seed reproduces a run exactly.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "nmkit/status.h"

namespace nmkit {

struct SamplerParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  int32_t top_k = 0;         // keep the k most likely tokens; 0 = all
  float top_p = 1.0f;        // keep the smallest most-likely set whose probability reaches p
  uint64_t seed = 0;
};

// Index of the largest value; ties go to the lowest index. NaN never wins (an all-NaN or empty
// input returns -1).
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  // temperature must be finite and >= 0, top_k >= 0, top_p in (0, 1].
  static Result<Sampler> create(const SamplerParams& params);

  // One token id from a row of logits. The order is llama.cpp's common one: top-k, softmax at the
  // temperature, top-p, then one draw. Candidates are ranked by logit, ties to the lower id, so a
  // seed gives the same ids on every machine. Fails on an empty row or a NaN/inf logit (named).
  Result<int32_t> sample(std::span<const float> logits);

  const SamplerParams& params() const { return params_; }

 private:
  explicit Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}
  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

}  // namespace nmkit
