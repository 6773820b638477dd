#include "linear_bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "linear_baselines.h"
#include "measure.h"
#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/prune.h"
#include "nmkit/quant.h"
#include "nmkit/reference.h"
#include "nmkit/slide.h"
#include "nmkit/threads.h"

namespace nmkit::bench {
namespace {

struct Record {
  std::string kernel, weight_dtype, pattern;
  int64_t M = 0, rows = 0, K = 0;
  int threads = 1;
  double median_ms = 0, min_ms = 0;
  int samples = 0;
  double weight_gbs = 0, gflops = 0, speedup = 0, byte_ratio = 1;
  double read_fraction = 0;  // weight_gbs over the read-bandwidth probe of the same run
  bool dense = false;
  double max_error_ratio = 0;  // largest |y - ref| / tolerance over the checked outputs (<= 1 passes)
};

// How a kernel's outputs are checked against the float64 reference on the dense-masked weight.
struct CheckSpec {
  bool bf16_x = false;            // the kernel rounds X to bf16 first
  bool int8 = false;              // X and W quantized: add the quantization error bound
  bool x_per_tensor = false;      // int8 X with one scale for the tensor (oneDNN) instead of per token
};

// One timed kernel: call(copy) computes Y for the current M into `y` from the copy-th rotated weight.
struct Candidate {
  Record record;
  double bytes = 0;  // weight bytes streamed per call
  int copies = 1;
  std::function<void(int)> call;
  CheckSpec check;
  // Timing, in interleaved rounds (see time_in_rounds).
  bool slow = false;             // one call takes over 0.25 s: one sample per round
  bool warm_every_copy = false;  // nmkit: a slid layer builds its many-token form on its first such call
  int next_copy = 1;             // rotation continues across rounds
  std::vector<double> round_ms;  // median of each round
};

// The current weight (dense-masked, in its dtype as f32 values) and tokens, plus sampled reference
// outputs for checking.
struct Problem {
  int64_t M = 0, rows = 0, K = 0;
  std::vector<float> w;        // dense-masked, values exact in the weight dtype
  std::vector<float> x;        // [M, K] f32
  std::vector<float> y;        // [M, rows] output of the kernel under test
  std::vector<int64_t> tokens; // sampled tokens that are checked
  std::vector<float> ref, ref_bf16x, abs_ref;  // [tokens, rows]
  std::vector<double> w_abs_sum, w_absmax;     // per row
};

std::vector<float> round_to_bf16(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return out;
}

Tensor matrix(const std::vector<float>& values, int64_t rows, int64_t cols) {
  return Tensor::from_f32(values, {rows, cols});
}

// Reference outputs of the sampled tokens: float64 sums of exact products, for X, X rounded to bf16,
// and |X| * |W| (the norm the tolerance is proportional to).
void prepare_reference(Problem& p) {
  p.tokens.clear();
  for (int64_t m : {int64_t{0}, p.M / 2, p.M - 1}) {
    if (std::find(p.tokens.begin(), p.tokens.end(), m) == p.tokens.end()) p.tokens.push_back(m);
  }
  const auto T = static_cast<int64_t>(p.tokens.size());
  std::vector<float> xs(static_cast<size_t>(T * p.K)), xs_abs(xs.size()), w_abs(p.w.size());
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(p.x.begin() + p.tokens[static_cast<size_t>(t)] * p.K, p.K, xs.begin() + t * p.K);
  }
  for (size_t i = 0; i < xs.size(); ++i) xs_abs[i] = std::fabs(xs[i]);
  for (size_t i = 0; i < w_abs.size(); ++i) w_abs[i] = std::fabs(p.w[i]);
  const Tensor w = matrix(p.w, p.rows, p.K), wa = matrix(w_abs, p.rows, p.K);
  auto run = [&](const std::vector<float>& xv, const Tensor& wt) {
    auto result = ref_dense_matmul(wt.view(), matrix(xv, T, p.K).view());
    NMKIT_ASSERT(result.ok());
    return result->y.to_f32();
  };
  p.ref = run(xs, w);
  p.ref_bf16x = run(round_to_bf16(xs), w);
  p.abs_ref = run(xs_abs, wa);
  p.w_abs_sum.assign(static_cast<size_t>(p.rows), 0.0);
  p.w_absmax.assign(static_cast<size_t>(p.rows), 0.0);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t k = 0; k < p.K; ++k) {
      const double a = std::fabs(static_cast<double>(p.w[static_cast<size_t>(r * p.K + k)]));
      p.w_abs_sum[static_cast<size_t>(r)] += a;
      p.w_absmax[static_cast<size_t>(r)] = std::max(p.w_absmax[static_cast<size_t>(r)], a);
    }
  }
}

// Largest |y - ref| / tolerance over the sampled outputs. Tolerance: any summation order of K exact
// or once-rounded products is within (K + 8) eps sum|x w| (Higham 3.1, eps = 2u); int8 adds the
// quantization error sx/2 sum|w| + sw/2 sum|x| + K sx sw / 4 (each code is within half a step).
double check_output(const Problem& p, const CheckSpec& spec) {
  double worst = 0;
  double x_tensor_absmax = 0;
  for (float v : p.x) x_tensor_absmax = std::max(x_tensor_absmax, std::fabs(static_cast<double>(v)));
  for (size_t t = 0; t < p.tokens.size(); ++t) {
    const int64_t m = p.tokens[t];
    double x_abs_sum = 0, x_absmax = 0;
    for (int64_t k = 0; k < p.K; ++k) {
      const double a = std::fabs(static_cast<double>(p.x[static_cast<size_t>(m * p.K + k)]));
      x_abs_sum += a;
      x_absmax = std::max(x_absmax, a);
    }
    if (spec.x_per_tensor) x_absmax = x_tensor_absmax;
    for (int64_t r = 0; r < p.rows; ++r) {
      const size_t i = t * static_cast<size_t>(p.rows) + static_cast<size_t>(r);
      const double expected = spec.bf16_x ? p.ref_bf16x[i] : p.ref[i];
      double tol = static_cast<double>(p.K + 8) * FLT_EPSILON * p.abs_ref[i];
      if (spec.bf16_x) tol += 1.0 / 256 * p.abs_ref[i];  // |x - bf16(x)| <= 2^-9 |x|, with room
      if (spec.int8) {
        const double sx = x_absmax / 127, sw = p.w_absmax[static_cast<size_t>(r)] / 127;
        tol += sx / 2 * p.w_abs_sum[static_cast<size_t>(r)] + sw / 2 * x_abs_sum + static_cast<double>(p.K) * sx * sw / 4;
        tol *= 1.001;
      }
      const double got = p.y[static_cast<size_t>(m * p.rows + r)];
      const double err = std::fabs(got - expected);
      if (!(err <= tol)) return std::isnan(err) ? INFINITY : std::max(worst, err / std::max(tol, 1e-300));
      worst = std::max(worst, tol > 0 ? err / tol : 0.0);
    }
  }
  return worst;
}

void print_header() {
  fmt::print("{:<34} {:>5} {:>9} {:>5} {:>6} {:>5} {:>3} {:>10} {:>8} {:>6} {:>9} {:>8} {:>8}\n", "kernel", "dtype",
             "pattern", "M", "rows", "K", "thr", "median ms", "GB/s", "% read", "GFLOP/s", "speedup", "ceiling");
}

void print_record(const Record& r) {
  fmt::print("{:<34} {:>5} {:>9} {:>5} {:>6} {:>5} {:>3} {:>10.3f} {:>8.1f} {:>5.0f}% {:>9.1f} {:>7.2f}x {:>7.2f}x\n",
             r.kernel, r.weight_dtype, r.pattern, r.M, r.rows, r.K, r.threads, r.median_ms, r.weight_gbs,
             100.0 * r.read_fraction, r.gflops, r.speedup, r.byte_ratio);
}

nlohmann::json to_json(const Record& r) {
  return {{"kernel", r.kernel},         {"weight_dtype", r.weight_dtype},
          {"pattern", r.pattern},       {"M", r.M},
          {"rows", r.rows},             {"K", r.K},
          {"threads", r.threads},       {"median_ms", r.median_ms},
          {"min_ms", r.min_ms},         {"samples", r.samples},
          {"weight_gbs", r.weight_gbs}, {"gflops", r.gflops},
          {"speedup_vs_best_dense", r.speedup}, {"byte_ratio_ceiling", r.byte_ratio},
          {"read_fraction", r.read_fraction},
          {"dense", r.dense},           {"checked", true},
          {"check_passed", r.max_error_ratio <= 1.0},
          {"max_error_ratio", r.max_error_ratio}};
}

// Copies of an operand of `bytes` to rotate through: a working set of cold_working_set_bytes()
// (measure.h; at least 512 MiB since a VM may report less cache than the host's: 70 GB/s was
// measured on a 68 MB working set with 32 MiB reported).
int rotated_copies(size_t bytes) { return rotation_copies(bytes, 64); }

// Rotated copies of a SparseLinear built by `make`.
std::vector<std::shared_ptr<SparseLinear>> rotated_layers(const std::function<Result<SparseLinear>()>& make, size_t* bytes) {
  auto first = make();
  NMKIT_ASSERT(first.ok());
  *bytes = first->bytes_streamed();
  std::vector<std::shared_ptr<SparseLinear>> out;
  out.push_back(std::make_shared<SparseLinear>(std::move(*first)));
  const int copies = rotated_copies(*bytes);
  for (int i = 1; i < copies; ++i) {
    auto more = make();
    NMKIT_ASSERT(more.ok());
    out.push_back(std::make_shared<SparseLinear>(std::move(*more)));
  }
  return out;
}

struct WeightSet {
  std::string dtype;  // "f32", "bf16", "int8"
  std::string pattern;  // "dense", "2:4", "6:8", ...
  std::vector<float> w;  // dense-masked values as f32
  std::vector<std::shared_ptr<SparseLinear>> layers;  // nmkit (rotated)
  std::string nmkit_kind;
  // --own-kernels: the same weight with LinearOptions::onednn = false, timed where the plan runs oneDNN.
  std::vector<std::shared_ptr<SparseLinear>> own_layers;
};

// The set's rotated layers from make(options), and with own = true also from make(options without oneDNN).
void set_layers(WeightSet& set, const std::function<Result<SparseLinear>(const LinearOptions&)>& make,
                const LinearOptions& options, bool own) {
  size_t bytes = 0;
  set.layers = rotated_layers([&] { return make(options); }, &bytes);
  if (!own) return;
  LinearOptions without = options;
  without.onednn = false;
  set.own_layers = rotated_layers([&] { return make(without); }, &bytes);
}

}  // namespace

// One weight set's problem for one M and everything its candidates' calls refer to, kept alive until
// every round has run.
struct SetRun {
  Problem p;
  std::vector<Candidate> candidates;
  std::vector<std::vector<std::shared_ptr<OneDnnLinear>>> dnn;
  std::vector<uint16_t> x_bf16;
  std::vector<int8_t> x_i8;
  float x_scale = 1.0f;
};

// Rounds of timing: each round times every candidate of every set in turn, so that drift of a shared
// machine (other tenants, clocks) hits all kernels of a round alike, and speedups are medians over
// rounds of same-round ratios.
constexpr int kRounds = 5;

void time_in_rounds(std::vector<std::unique_ptr<SetRun>>& runs, double min_seconds) {
  for (int round = 0; round < kRounds; ++round) {
    for (auto& run : runs) {
      for (Candidate& c : run->candidates) {
        const int offset = c.next_copy;
        const Timing t = time_median([&](int i) { c.call((offset + i) % c.copies); }, c.slow ? 1 : 2,
                                     c.slow ? 0.0 : min_seconds / kRounds, 0);
        c.next_copy = (offset + t.samples) % c.copies;
        c.round_ms.push_back(t.median_ms);
        c.record.samples += t.samples;
        c.record.min_ms = round == 0 ? t.min_ms : std::min(c.record.min_ms, t.min_ms);
      }
    }
  }
}

int run_linear_bench(const LinearBenchOptions& options) {
  const int threads = thread_count();
  openblas_threads(threads);
  const double copy_gbs = copy_bandwidth_gbs();
  const ReadBandwidth read = measure_read_bandwidth();
  const double read_gbs = read.gbs;
  fmt::print("threads {}, last-level cache {} MiB, copy bandwidth {:.1f} GB/s (read+write), read bandwidth {:.1f} GB/s "
             "(one stream {:.1f}, 4 rows {:.1f}; % read: weight GB/s over it)\n",
             threads, last_level_cache_bytes() >> 20, copy_gbs, read_gbs, read.one_stream_gbs, read.four_rows_gbs);
  if (options.baselines && have_openblas()) fmt::print("OpenBLAS core: {}\n", openblas_core());
  if (const char* policy = std::getenv("OMP_WAIT_POLICY")) fmt::print("OMP_WAIT_POLICY={}\n", policy);
  fmt::print("median ms: median of {} interleaved rounds (each round times every kernel of a dtype and M in turn);\n"
             "speedup: median over the rounds of (fastest dense kernel of the same weight dtype and M in that round /\n"
             "kernel); ceiling: byte ratio (memory-bound limit)\n\n", kRounds);

  nlohmann::json records = nlohmann::json::array();
  records.push_back({{"kernel", "memcpy"}, {"threads", threads}, {"copy_gbs", copy_gbs}, {"read_gbs", read_gbs},
                     {"openblas_core", openblas_core()}, {"llc_bytes", last_level_cache_bytes()}});
  bool all_ok = true;
  LinearOptions lin;
  lin.tier = options.tier;

  for (const auto& [rows, K] : options.shapes) {
    const std::vector<float> w0 = [&] {
      std::mt19937_64 rng(0x5EED0000u + static_cast<uint64_t>(rows * 31 + K));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> v(static_cast<size_t>(rows * K));
      for (auto& e : v) e = dist(rng);
      return v;
    }();
    for (const auto& dtype_name_text : options.dtypes) {
      const bool is_int8 = dtype_name_text == "int8";
      const DType store = dtype_name_text == "bf16" ? DType::BF16 : DType::F32;
      const Tensor w_dense = Tensor::from_f32(w0, {rows, K}, store);
      // Weight forms: dense plus each pattern (2:4 as sparse24, others as nm; int8: sparse24 and slid).
      std::vector<WeightSet> sets;
      {
        WeightSet s{dtype_name_text, "dense", w_dense.to_f32(), {}, "dense", {}};
        if (!is_int8) {
          set_layers(s, [&](const LinearOptions& o) { return SparseLinear::dense(w_dense.view(), o); }, lin, options.own_kernels);
        } else {
          LinearOptions q = lin;
          q.int8 = true;
          if (SparseLinear::dense(w_dense.view(), q).ok()) {
            set_layers(s, [&](const LinearOptions& o) { return SparseLinear::dense(w_dense.view(), o); }, q, options.own_kernels);
          }
        }
        sets.push_back(std::move(s));
        if (store == DType::BF16) {
          // bf16 weights with bf16 activations as their own dense row: the input oneDNN's bf16 baseline
          // is given (with f32 activations nmkit keeps X exact and runs an f32 GEMM, half the speed).
          WeightSet bx{dtype_name_text, "dense", sets[0].w, {}, "bf16x", {}};
          LinearOptions o = lin;
          o.bf16_activations = true;
          set_layers(bx, [&](const LinearOptions& opts) { return SparseLinear::dense(w_dense.view(), opts); }, o,
                     options.own_kernels);
          sets.push_back(std::move(bx));
        }
      }
      for (const Pattern& pattern : options.patterns) {
        auto pruned = prune(w_dense.view(), pattern, PruneMethod::Magnitude, {}, "w");
        NMKIT_ASSERT(pruned.ok());
        WeightSet s{dtype_name_text, pattern.str(), pruned->pruned.to_f32(), {}, "", {}};
        std::vector<WeightSet> extra;
        if (!is_int8) {
          if (pattern == Pattern{2, 4}) {
            auto packed = compress_sparse24(pruned->pruned.view(), "w");
            NMKIT_ASSERT(packed.ok());
            set_layers(s, [&](const LinearOptions& o) { return SparseLinear::sparse24(*packed, o); }, lin, options.own_kernels);
            if (store == DType::BF16) {
              // The same weight with bf16 activations (vdpbf16ps where the tier has it) as its own row.
              LinearOptions bx = lin;
              bx.bf16_activations = true;
              extra.push_back(WeightSet{dtype_name_text, pattern.str(), s.w, {}, "bf16x", {}});
              set_layers(extra.back(), [&](const LinearOptions& o) { return SparseLinear::sparse24(*packed, o); }, bx, options.own_kernels);
            }
          } else if (pattern.group <= 16) {
            auto packed = compress_nm(pruned->pruned.view(), pattern, "w");
            NMKIT_ASSERT(packed.ok());
            set_layers(s, [&](const LinearOptions& o) { return SparseLinear::nm(*packed, o); }, lin, options.own_kernels);
            if (store == DType::BF16) {
              LinearOptions bx = lin;
              bx.bf16_activations = true;
              extra.push_back(WeightSet{dtype_name_text, pattern.str(), s.w, {}, "bf16x", {}});
              set_layers(extra.back(), [&](const LinearOptions& o) { return SparseLinear::nm(*packed, o); }, bx, options.own_kernels);
            }
          }
        } else {
          LinearOptions q = lin;
          q.int8 = true;
          if (pattern == Pattern{2, 4}) {
            auto packed = compress_sparse24(pruned->pruned.view(), "w");
            NMKIT_ASSERT(packed.ok());
            if (SparseLinear::sparse24(*packed, q).ok()) {
              set_layers(s, [&](const LinearOptions& o) { return SparseLinear::sparse24(*packed, o); }, q, options.own_kernels);
            }
          } else {
            if (pattern.slidable()) {
              auto geometry = SlideGeometry::make(pattern, K);
              NMKIT_ASSERT(geometry.ok());
              auto slid = slide(pruned->pruned.view(), *geometry, "w");
              NMKIT_ASSERT(slid.ok());
              if (SparseLinear::slid(slid->view(), *geometry, q).ok()) {
                set_layers(s, [&](const LinearOptions& o) { return SparseLinear::slid(slid->view(), *geometry, o); }, q,
                           options.own_kernels);
              }
            }
            if (pattern.group <= 16) {  // the nm INT8 form (codes and bitmask), its own row beside the slid one
              auto nm = compress_nm(pruned->pruned.view(), pattern, "w");
              NMKIT_ASSERT(nm.ok());
              extra.push_back(WeightSet{dtype_name_text, pattern.str(), s.w, {}, "", {}});
              set_layers(extra.back(), [&](const LinearOptions& o) { return SparseLinear::nm(*nm, o); }, q,
                         options.own_kernels);
            }
          }
        }
        sets.push_back(std::move(s));
        for (auto& e : extra) sets.push_back(std::move(e));
      }

      // Baseline weights that do not depend on M.
      std::vector<std::shared_ptr<OpenBlasLinear>> blas;
      if (options.baselines && have_openblas() && dtype_name_text == "f32") {
        const int copies = rotated_copies(static_cast<size_t>(rows * K) * 4);
        for (int i = 0; i < copies; ++i) blas.push_back(std::make_shared<OpenBlasLinear>(sets[0].w.data(), rows, K));
      }
      std::map<std::string, std::vector<std::shared_ptr<EigenCsrLinear>>> eigen;
      if (options.baselines && have_eigen() && dtype_name_text == "f32") {
        for (const WeightSet& set : sets) {
          if (set.pattern == "dense") continue;  // Eigen CSR is a sparse baseline
          auto first = std::make_shared<EigenCsrLinear>(set.w.data(), rows, K);
          const int copies = rotated_copies(first->weight_bytes());
          auto& list = eigen[set.pattern];
          list.push_back(first);
          for (int i = 1; i < copies; ++i) list.push_back(std::make_shared<EigenCsrLinear>(set.w.data(), rows, K));
        }
      }
      // int8 weights for oneDNN: per-row codes and scales of the dense weight.
      std::optional<Quantized> w_q;
      if (options.baselines && have_onednn() && is_int8) {
        auto q = quantize_weights(w_dense.view(), QuantType::Int8, "w");
        NMKIT_ASSERT(q.ok());
        w_q = std::move(*q);
      }

      for (int64_t M : options.Ms) {
        std::vector<float> x(static_cast<size_t>(M * K));
        {
          std::mt19937_64 rng(0xAC700000u + static_cast<uint64_t>(M));
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          for (auto& e : x) e = dist(rng);
        }
        std::vector<std::unique_ptr<SetRun>> runs;
        for (const WeightSet& set : sets) {
          // The candidates' calls refer to this set's state by reference; it lives in `runs`.
          runs.push_back(std::make_unique<SetRun>());
          SetRun& run = *runs.back();
          Problem& p = run.p;
          p.M = M;
          p.rows = rows;
          p.K = K;
          p.w = set.w;
          p.x = x;
          p.y.assign(static_cast<size_t>(M * rows), 0.0f);
          prepare_reference(p);
          std::vector<Candidate>& candidates = run.candidates;
          auto base_record = [&](const std::string& kernel, bool dense, int thr) {
            Record r;
            r.kernel = kernel;
            r.weight_dtype = set.dtype;
            r.pattern = set.pattern;
            r.M = M;
            r.rows = rows;
            r.K = K;
            r.threads = thr;
            r.dense = dense;
            return r;
          };
          // nmkit as planned, and with --own-kernels its own kernels where the plan runs oneDNN.
          for (const auto* layers : {&set.layers, &set.own_layers}) {
            if (layers->empty()) continue;
            const SparseLinear& first = *(*layers)[0];
            if (layers == &set.own_layers && first.kernel_name(M) == set.layers[0]->kernel_name(M)) continue;
            Candidate c;
            // A dense row counts as dense (the speedup baseline) only as planned.
            c.record = base_record("nmkit " + first.kernel_name(M), set.pattern == "dense" && layers == &set.layers,
                                   threads);
            c.record.byte_ratio = first.byte_ratio(M);
            c.bytes = static_cast<double>(first.bytes_streamed(M));
            c.copies = static_cast<int>(layers->size());
            c.check.int8 = is_int8;
            c.check.bf16_x = set.nmkit_kind == "bf16x";
            c.warm_every_copy = true;
            if (set.nmkit_kind == "bf16x") {
              // bf16 activations arrive in bf16, as oneDNN's bf16 baseline gets them (prepared outside
              // the timing; the values are X rounded, which is what the layer computes with).
              run.x_bf16.resize(x.size());
              for (size_t i = 0; i < x.size(); ++i) run.x_bf16[i] = f32_to_bf16(x[i]);
              const TensorView xv{DType::BF16, {M, K}, reinterpret_cast<const std::byte*>(run.x_bf16.data())};
              c.call = [&, xv, list = *layers](int i) {
                NMKIT_ASSERT(list[static_cast<size_t>(i)]->apply(xv, p.y.data()).ok());
              };
            } else {
              c.call = [&, list = *layers](int i) {
                NMKIT_ASSERT(list[static_cast<size_t>(i)]->apply(p.x.data(), M, p.y.data()).ok());
              };
            }
            candidates.push_back(std::move(c));
          }
          if (set.pattern == "dense" && !blas.empty()) {
            Candidate c;
            c.record = base_record(std::string("openblas ") + (M == 1 ? "sgemv" : "sgemm") + " (" + openblas_core() + ")",
                                   true, threads);
            c.bytes = static_cast<double>(blas[0]->weight_bytes());
            c.copies = static_cast<int>(blas.size());
            c.call = [&](int i) { blas[static_cast<size_t>(i)]->run(p.x.data(), M, p.y.data()); };
            candidates.push_back(std::move(c));
          }
          // oneDNN in both weight layouts (prepacked and plain): a user would pick the faster.
          auto& dnn = run.dnn;
          dnn.reserve(2);  // the candidates keep references to its elements
          auto& x_bf16 = run.x_bf16;
          auto& x_i8 = run.x_i8;
          float& x_scale = run.x_scale;
          if (set.pattern == "dense" && set.nmkit_kind != "bf16x" && options.baselines && have_onednn()) {
            const std::string type = dtype_name_text;
            // Activations in oneDNN's input type, prepared outside the timing.
            if (type == "bf16") {
              x_bf16.resize(x.size());
              for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = f32_to_bf16(x[i]);
            } else if (type == "int8") {
              float absmax = 0;
              for (float v : x) absmax = std::max(absmax, std::fabs(v));
              const float inv = 127.0f / absmax;
              x_scale = absmax / 127.0f;
              x_i8.resize(x.size());
              for (size_t i = 0; i < x.size(); ++i) {
                x_i8[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
              }
            }
            const void* xin = type == "f32" ? static_cast<const void*>(p.x.data())
                              : type == "bf16" ? static_cast<const void*>(x_bf16.data())
                                               : static_cast<const void*>(x_i8.data());
            for (bool plain : {false, true}) {
              auto make = [&] {
                return std::shared_ptr<OneDnnLinear>(OneDnnLinear::make(type, plain, M, rows, K, set.w.data(),
                                                                        w_q ? w_q->codes.as<int8_t>() : nullptr,
                                                                        w_q ? w_q->scales.as<float>() : nullptr));
              };
              auto first = make();
              if (!first) continue;
              std::vector<std::shared_ptr<OneDnnLinear>> copies{first};
              const int n = rotated_copies(first->weight_bytes());
              for (int i = 1; i < n; ++i) copies.push_back(make());
              dnn.push_back(std::move(copies));
              const auto& list = dnn.back();
              Candidate c;
              c.record = base_record("onednn matmul " + type + (plain ? " plain" : " prepacked"), true, threads);
              c.bytes = static_cast<double>(first->weight_bytes());
              c.copies = static_cast<int>(list.size());
              c.check.bf16_x = type == "bf16";
              c.check.int8 = type == "int8";
              c.check.x_per_tensor = type == "int8";
              c.call = [&list, xin, &x_scale, &p](int i) { list[static_cast<size_t>(i)]->run(xin, x_scale, p.y.data()); };
              candidates.push_back(std::move(c));
            }
          }
          if (auto it = eigen.find(set.pattern); it != eigen.end()) {
            Candidate c;
            c.record = base_record("eigen csr", false, it->second[0]->threads());
            c.bytes = static_cast<double>(it->second[0]->weight_bytes());
            c.copies = static_cast<int>(it->second.size());
            const auto& list = it->second;
            c.call = [&](int i) { list[static_cast<size_t>(i)]->run(p.x.data(), M, p.y.data()); };
            candidates.push_back(std::move(c));
          }

          for (Candidate& c : candidates) {
            std::fill(p.y.begin(), p.y.end(), NAN);
            const auto first = std::chrono::steady_clock::now();
            c.call(0);  // warm-up and the one checked result
            const double first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
            c.record.max_error_ratio = check_output(p, c.check);
            if (!(c.record.max_error_ratio <= 1.0)) {
              // A wrong baseline is reported and left out of the fastest dense kernel (oneDNN's int8
              // GEMM without VNNI saturates, docs/design.md 8.4); a wrong nmkit kernel fails the run.
              const bool own = c.record.kernel.rfind("nmkit ", 0) == 0;
              fmt::print("CHECK FAILED: {} {} {} M={}: error / tolerance = {:.3g}{}\n", c.record.kernel, set.dtype,
                         set.pattern, M, c.record.max_error_ratio, own ? "" : " (baseline: not a speedup reference)");
              if (own) all_ok = false;
            }
            // Slow calls (Eigen at large M) take one sample per round so that the default run stays short.
            c.slow = first_s > 0.25;
            // Steady state: one untimed call per rotated copy (the first call of a slid layer at many
            // tokens builds its unslid form once, as in an application; this run times the rest).
            if (c.warm_every_copy) {
              for (int i = 1; i < c.copies; ++i) c.call(i);
            }
          }
          p.w = {};  // checked: the dense-masked copy is no longer needed while the rounds run
        }
        time_in_rounds(runs, options.min_seconds);
        std::vector<const Candidate*> all;
        for (const auto& run : runs) {
          for (const Candidate& c : run->candidates) all.push_back(&c);
        }
        if (all.empty()) continue;
        std::vector<double> best_dense(kRounds, INFINITY);
        for (const Candidate* c : all) {
          if (!c->record.dense || !(c->record.max_error_ratio <= 1.0)) continue;
          for (int i = 0; i < kRounds; ++i) best_dense[i] = std::min(best_dense[i], c->round_ms[i]);
        }
        print_header();
        for (const Candidate* c : all) {
          Record r = c->record;
          r.median_ms = median_of(c->round_ms);
          r.weight_gbs = c->bytes / (r.median_ms * 1e6);
          r.read_fraction = r.weight_gbs / read_gbs;
          r.gflops = 2.0 * static_cast<double>(M * rows * K) / (r.median_ms * 1e6);
          std::vector<double> ratios;
          for (int i = 0; i < kRounds; ++i) ratios.push_back(best_dense[i] / c->round_ms[i]);
          r.speedup = std::isfinite(best_dense[0]) ? median_of(ratios) : 0.0;
          print_record(r);
          records.push_back(to_json(r));
        }
        fmt::print("\n");
        std::fflush(stdout);
      }
    }
  }
  if (!options.json_path.empty()) {
    std::ofstream out(options.json_path);
    out << records.dump(2) << "\n";
    if (!out) {
      fmt::print(stderr, "nmkit bench linear: cannot write {}\n", options.json_path);
      return 1;
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace nmkit::bench
