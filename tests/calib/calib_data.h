// Calibration-like inputs for the calib tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace nmkit::test {

// X [tokens, K] with correlated features: a rank-`rank` mix of Gaussian factors plus 5% independent
// noise, and per-feature scales spread over two decades (as LLM activations have outlier features).
inline std::vector<float> correlated_inputs(int64_t tokens, int64_t K, int64_t rank, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> log_scale(-1.0, 1.0);
  std::vector<double> mix(rank * K), scale(K);
  for (auto& v : mix) v = normal(rng);
  for (auto& v : scale) v = std::pow(10.0, log_scale(rng));
  std::vector<float> X(tokens * K);
  std::vector<double> z(rank);
  for (int64_t t = 0; t < tokens; ++t) {
    for (auto& v : z) v = normal(rng);
    for (int64_t k = 0; k < K; ++k) {
      double s = 0.05 * normal(rng);
      for (int64_t j = 0; j < rank; ++j) s += z[j] * mix[j * K + k];
      X[t * K + k] = static_cast<float>(s * scale[k]);
    }
  }
  return X;
}

}  // namespace nmkit::test
