// The library example of README.md ("The library"), compiled and run by `make test`; README.md
// quotes this file verbatim (tests/api/readme_quotes_example.py checks that it does).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "nmkit/nmkit.h"

using namespace nmkit;

// Every call returns a Result (a value or an Error whose one-line message names tensor and value).
static int fail(const Error& error) {
  std::fprintf(stderr, "%s\n", error.message().c_str());
  return 1;
}

int main() {
  // A [rows, K] f32 weight (from a checkpoint: SafetensorsFile::open(path)->view("name")).
  const int64_t rows = 512, K = 1024, M = 4;
  std::vector<float> w(rows * K), x(M * K);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  const Tensor weight = Tensor::from_f32(w, {rows, K});

  // Prune to 2:4 by magnitude and see what it cost.
  const Pattern pattern = *Pattern::parse("2:4");
  Result<PruneResult> pruned = prune(weight.view(), pattern, PruneMethod::Magnitude);
  if (!pruned) return fail(pruned.error());
  const PruneMetrics metrics = metrics_from(pruned->sums);
  std::printf("2:4: sparsity %.1f%%, relative error %.4f, retained L1 %.4f\n",
              metrics.sparsity_percent, metrics.relative_error, metrics.retained_l1);

  // Pack as sparse24 (values + 2-bit indices) and run it as a linear layer on this CPU.
  Result<Sparse24> packed = compress_sparse24(pruned->pruned.view(), "w");
  Result<SparseLinear> sparse = SparseLinear::sparse24(*packed);
  Result<SparseLinear> dense = SparseLinear::dense(pruned->pruned.view());
  if (!packed) return fail(packed.error());
  if (!sparse) return fail(sparse.error());
  if (!dense) return fail(dense.error());
  std::vector<float> y_sparse(M * rows), y_dense(M * rows);
  if (Status s = sparse->apply(x.data(), M, y_sparse.data()); !s) return fail(s.error());
  if (Status s = dense->apply(x.data(), M, y_dense.data()); !s) return fail(s.error());
  double worst = 0;
  for (size_t i = 0; i < y_sparse.size(); ++i) worst = std::fmax(worst, std::fabs(y_sparse[i] - y_dense[i]));
  std::printf("%s: %zu bytes per call (dense: %zu), byte ratio %.2fx, max |sparse - dense| = %.2g\n",
              sparse->kernel_name().c_str(), sparse->bytes_streamed(), dense->bytes_streamed(),
              sparse->byte_ratio(), worst);

  // SlideSparse: a 6:8 weight becomes 2:4 over K' = 1.5 K and runs as INT8 2:4 on lifted activations.
  Result<PruneResult> pruned68 = prune(weight.view(), *Pattern::parse("6:8"), PruneMethod::Magnitude);
  if (!pruned68) return fail(pruned68.error());
  Result<SlidWeight> slid = slide(pruned68->pruned.view(), *Pattern::parse("6:8"));
  if (!slid) return fail(slid.error());
  Result<SparseLinear> slid_linear = SparseLinear::slid(slid->weight.view(), slid->geometry);
  if (!slid_linear) return fail(slid_linear.error());
  Result<SparseLinear> dense68 = SparseLinear::dense(pruned68->pruned.view());
  if (!dense68) return fail(dense68.error());
  std::vector<float> y_slid(M * rows), y_dense68(M * rows);
  if (Status s = slid_linear->apply(x.data(), M, y_slid.data()); !s) return fail(s.error());
  if (Status s = dense68->apply(x.data(), M, y_dense68.data()); !s) return fail(s.error());
  double err2 = 0, ref2 = 0;  // INT8 quantization is the only difference: sliding is exact
  for (size_t i = 0; i < y_slid.size(); ++i) {
    err2 += std::pow(y_slid[i] - y_dense68[i], 2);
    ref2 += std::pow(y_dense68[i], 2);
  }
  std::printf("%s: K %lld -> K' %lld, relative error vs f32 6:8 %.4f\n", slid_linear->kernel_name().c_str(),
              static_cast<long long>(K), static_cast<long long>(slid->geometry.K_prime()), std::sqrt(err2 / ref2));
  return worst <= 1e-3 && err2 <= 1e-3 * ref2 ? 0 : 1;
}
