#include "tests/util/random.h"

namespace nmkit::test {

std::string seed_trace(uint64_t seed) { return "seed=" + std::to_string(seed); }

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> random_small_ints(size_t n, uint64_t seed, int lo, int hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return v;
}

Tensor random_tensor(DType dtype, Shape shape, uint64_t seed, float lo, float hi) {
  const auto n = static_cast<size_t>(shape_numel(shape));
  return Tensor::from_f32(random_floats(n, seed, lo, hi), std::move(shape), dtype);
}

}  // namespace nmkit::test
