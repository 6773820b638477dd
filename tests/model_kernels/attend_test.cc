// attend (src/model/model_kernels.h): causal softmax attention of up to kMaxQueries queries over a KV
// cache, against a float64 loop written here, and the header's promise that a query's output does not
// depend on the other queries of the call (bit for bit alone and in a group), on the ISA tier the
// suite runs (NMKIT_ISA).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/model_kernels.h"

namespace nmkit::model {
namespace {

struct Cache {
  int64_t hd = 0, stride = 0;
  std::vector<float> kt, v;  // Kt (hd, stride), V (stride, hd)
};

Cache random_cache(int64_t hd, int64_t stride, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Cache c{hd, stride, std::vector<float>(static_cast<size_t>(hd * stride)), std::vector<float>(static_cast<size_t>(stride * hd))};
  for (float& x : c.kt) x = normal(rng);
  for (float& x : c.v) x = normal(rng);
  return c;
}

// softmax(scale * q . K[:n]) V[:n] in float64.
std::vector<double> reference(const Cache& c, const float* q, int64_t n, float scale) {
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < c.hd; ++d) dot += static_cast<double>(q[d]) * c.kt[static_cast<size_t>(d * c.stride + j)];
    s[static_cast<size_t>(j)] = dot * scale;
  }
  const double max = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - max));
  std::vector<double> out(static_cast<size_t>(c.hd), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < c.hd; ++d) out[static_cast<size_t>(d)] += s[static_cast<size_t>(j)] / sum * c.v[static_cast<size_t>(j * c.hd + d)];
  }
  return out;
}

TEST(Attend, MatchesAFloat64LoopAndEachQueryIsItsOwn) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t hd : {6, 64, 72}) {
    const int64_t stride = 53;  // positions 1..53: partial 16-position vectors everywhere
    const Cache c = random_cache(hd, stride, rng);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    for (int nq : {1, 5, kMaxQueries}) {
      std::vector<float> q(static_cast<size_t>(nq * hd)), out(static_cast<size_t>(nq * hd), NAN);
      for (float& x : q) x = normal(rng);
      const float* qp[kMaxQueries];
      float* op[kMaxQueries];
      int64_t n_pos[kMaxQueries];
      for (int h = 0; h < nq; ++h) {
        qp[h] = q.data() + h * hd;
        op[h] = out.data() + h * hd;
        n_pos[h] = std::max<int64_t>(1, stride - 7 * h);  // queries of one call at different lengths
      }
      std::vector<float> scores(static_cast<size_t>(kMaxQueries * stride));
      attend(qp, n_pos, nq, c.kt.data(), stride, c.v.data(), hd, scale, scores.data(), op);
      for (int h = 0; h < nq; ++h) {
        const std::vector<double> want = reference(c, qp[h], n_pos[h], scale);
        for (int64_t d = 0; d < hd; ++d) {
          ASSERT_NEAR(op[h][d], want[static_cast<size_t>(d)], 2e-5 * (1.0 + std::fabs(want[static_cast<size_t>(d)])))
              << "hd " << hd << " nq " << nq << " query " << h << " n_pos " << n_pos[h] << " d " << d;
        }
        std::vector<float> alone(static_cast<size_t>(hd), NAN);
        float* alone_out[1] = {alone.data()};
        attend(&qp[h], &n_pos[h], 1, c.kt.data(), stride, c.v.data(), hd, scale, scores.data(), alone_out);
        for (int64_t d = 0; d < hd; ++d) {
          uint32_t a, b;
          std::memcpy(&a, &alone[static_cast<size_t>(d)], 4);
          std::memcpy(&b, &op[h][d], 4);
          ASSERT_EQ(a, b) << "hd " << hd << " query " << h << " of " << nq << ", d " << d << ": alone "
                          << alone[static_cast<size_t>(d)] << ", in the call " << op[h][d];
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit::model
