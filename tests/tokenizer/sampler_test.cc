// Sampler: greedy ties, determinism per seed, and top-k / top-p / temperature checked against the
// distributions they define (frequencies over many draws vs probabilities computed here).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "nmkit/sampler.h"

namespace nmkit {
namespace {

Sampler make(float temperature, int32_t top_k, float top_p, uint64_t seed) {
  auto s = Sampler::create({temperature, top_k, top_p, seed});
  EXPECT_TRUE(s.ok());
  return std::move(s.value());
}

TEST(Sampler, GreedyTakesTheLowestIdAmongTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, NAN};
  EXPECT_EQ(argmax(logits), 1);
  Sampler greedy = make(0.0f, 0, 1.0f, 1);
  const std::vector<float> finite = {1.0f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(greedy.sample(finite).value(), 1);
  EXPECT_EQ(argmax(std::vector<float>{}), -1);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(static_cast<double>(i) * 0.37) * 3);
  auto run = [&](uint64_t seed) {
    Sampler s = make(0.9f, 50, 0.95f, seed);
    std::vector<int32_t> ids;
    for (int i = 0; i < 64; ++i) ids.push_back(s.sample(logits).value());
    return ids;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

// Frequencies of 200000 draws within 5 standard errors of the probabilities the definition gives.
void expect_distribution(Sampler& s, const std::vector<float>& logits,
                         const std::vector<double>& want) {
  const int draws = 200000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[s.sample(logits).value()];
  for (size_t id = 0; id < want.size(); ++id) {
    const double freq = counts[static_cast<int32_t>(id)] / static_cast<double>(draws);
    const double se = std::sqrt(want[id] * (1 - want[id]) / draws);
    EXPECT_NEAR(freq, want[id], 5 * se + 1e-12) << "token " << id;
  }
}

TEST(Sampler, TemperatureTopKTopPFollowTheirDefinitions) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f};
  auto softmax = [&](float t, size_t keep) {
    std::vector<double> p(logits.size(), 0.0);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(logits[i] / t);
    for (double& x : p) x /= sum;
    return p;
  };
  Sampler plain = make(1.0f, 0, 1.0f, 3);
  expect_distribution(plain, logits, softmax(1.0f, 5));
  Sampler hot = make(2.0f, 0, 1.0f, 4);
  expect_distribution(hot, logits, softmax(2.0f, 5));
  Sampler top2 = make(1.0f, 2, 1.0f, 5);
  expect_distribution(top2, logits, softmax(1.0f, 2));
  // top-p 0.8 at T=1: p = .464 .171 .104 .063 .023 (normalised .560 .206 .125 .076 .034):
  // .560 + .206 = .766 < .8, + .125 = .891 >= .8, so three tokens stay.
  Sampler nucleus = make(1.0f, 0, 0.8f, 6);
  expect_distribution(nucleus, logits, softmax(1.0f, 3));
}

TEST(Sampler, BadParametersAndLogitsAreErrors) {
  EXPECT_FALSE(Sampler::create({-1.0f, 0, 1.0f, 0}).ok());
  EXPECT_FALSE(Sampler::create({1.0f, -3, 1.0f, 0}).ok());
  EXPECT_FALSE(Sampler::create({1.0f, 0, 0.0f, 0}).ok());
  EXPECT_FALSE(Sampler::create({1.0f, 0, 1.5f, 0}).ok());
  Sampler s = make(1.0f, 0, 1.0f, 0);
  auto nan = s.sample(std::vector<float>{0.0f, NAN});
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error().message().find("logit 1"), std::string::npos);
  EXPECT_FALSE(s.sample(std::vector<float>{}).ok());
}

}  // namespace
}  // namespace nmkit
