#include "nmkit/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace nmkit {

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

Result<Sampler> Sampler::create(const SamplerParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0) {
    return Error("sampler: temperature " + std::to_string(p.temperature) + " must be >= 0");
  }
  if (p.top_k < 0) return Error("sampler: top-k " + std::to_string(p.top_k) + " must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return Error("sampler: top-p " + std::to_string(p.top_p) + " must be in (0, 1]");
  }
  return Sampler(p);
}

Result<int32_t> Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) return Error("sampler: empty logits");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return Error("sampler: logit " + std::to_string(i) + " is " + std::to_string(logits[i]));
    }
  }
  if (params_.temperature <= 0.0f) return argmax(logits);

  const auto n = static_cast<int32_t>(logits.size());
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int32_t kept = n;
  if (params_.top_k > 0 && params_.top_k < n) {
    kept = params_.top_k;
    std::partial_sort(order_.begin(), order_.begin() + kept, order_.end(), more_likely);
  } else {
    std::sort(order_.begin(), order_.end(), more_likely);
  }
  // Softmax in double over the kept candidates, shifted by the maximum so exp cannot overflow.
  probs_.resize(kept);
  const double max_logit = logits[order_[0]];
  double sum = 0;
  for (int32_t i = 0; i < kept; ++i) {
    probs_[i] = std::exp((static_cast<double>(logits[order_[i]]) - max_logit) / params_.temperature);
    sum += probs_[i];
  }
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    int32_t needed = kept;
    for (int32_t i = 0; i < kept; ++i) {
      cumulative += probs_[i] / sum;
      if (cumulative >= params_.top_p) {
        needed = i + 1;
        break;
      }
    }
    kept = needed;
    sum = std::accumulate(probs_.begin(), probs_.begin() + kept, 0.0);
  }
  // u in [0, 1) from the top 53 bits: the same on every standard library (unlike
  // std::uniform_real_distribution, whose algorithm is unspecified).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double target = u * sum;
  for (int32_t i = 0; i < kept; ++i) {
    target -= probs_[i];
    if (target < 0) return order_[i];
  }
  return order_[kept - 1];  // rounding left a sliver past the last candidate
}

}  // namespace nmkit
