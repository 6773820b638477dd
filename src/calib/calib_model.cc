// The block-by-block calibration driver (docs/design.md section 12); see nmkit/calib_model.h.
#include "nmkit/calib_model.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "calib/method_common.h"
#include "calib/permute_choice.h"
#include "core/stopwatch.h"
#include "nmkit/permute.h"

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;

std::string tensor_name(int64_t b, std::string_view linear) {
  return "blk." + std::to_string(b) + "." + std::string(linear) + ".weight";
}

// The statistics of one input shared by the linears `names` of a block.
struct GroupStats {
  std::vector<std::string> names;
  std::unique_ptr<InputStats> stats;        // norms (Wanda), Hessian (SparseGPT)
  std::unique_ptr<InputStats> error_stats;  // Wanda: Hessian of the first tokens, for the error
  std::unique_ptr<CrossStats> cross;        // CalibOptions::dense_targets: X_d^T X_p (12.4)
  ChannelOrder order;  // the input's channels as the block's permutation reorders them (12.2)
  bool columns_moved = false;  // CalibOptions::permute_inputs: its readers are pruned in `order`
};

// ||W - Wp||_F / ||W||_F.
double relative_difference(const TensorView& w, const Tensor& pruned) {
  const std::vector<float> a = to_f32(w), b = pruned.to_f32();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(a[i]) * double(a[i]);
  }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

}  // namespace

Result<CalibMethod> parse_calib_method(std::string_view text) {
  if (text == "magnitude") return CalibMethod::Magnitude;
  if (text == "wanda") return CalibMethod::Wanda;
  if (text == "sparsegpt") return CalibMethod::SparseGpt;
  if (text == "admm") return CalibMethod::Admm;
  return Error(ErrorCode::InvalidArgument, "unknown pruning method '" + std::string(text) +
               "' (expected magnitude, wanda, sparsegpt or admm)");
}

std::string_view calib_method_name(CalibMethod method) {
  switch (method) {
    case CalibMethod::Magnitude: return "magnitude";
    case CalibMethod::Wanda: return "wanda";
    case CalibMethod::SparseGpt: return "sparsegpt";
    case CalibMethod::Admm: return "admm";
  }
  return "unknown";
}

bool needs_calibration(CalibMethod method) { return method != CalibMethod::Magnitude; }
bool needs_calibration_passes(CalibMethod method, int refit_steps, bool swaps, bool dense_targets) {
  return needs_calibration(method) || refit_steps > 0 || swaps || dense_targets;
}

Result<std::vector<int32_t>> calibration_sequences(const std::vector<int32_t>& tokens, int64_t n_seq,
                                                   int64_t seq_len, std::string_view what) {
  if (n_seq < 1 || seq_len < 1) {
    return Error(ErrorCode::InvalidArgument, "calibration needs at least one sequence of at least one token, got " +
                 std::to_string(n_seq) + " x " + std::to_string(seq_len));
  }
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < seq_len) {
    return Error(ErrorCode::InvalidArgument, std::string(what) + ": calibration text has " + std::to_string(n_tokens) +
                 " tokens, fewer than one sequence of " + std::to_string(seq_len));
  }
  const int64_t n = std::min(n_seq, n_tokens / seq_len);
  const int64_t stride = n_tokens / n;  // >= seq_len: windows do not overlap
  std::vector<int32_t> out(static_cast<size_t>(n * seq_len));
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(tokens.begin() + i * stride, seq_len, out.begin() + i * seq_len);
  }
  return out;
}

struct ModelCalibrator::State {
  LlamaModel* model = nullptr;
  std::vector<int32_t> tokens;
  int64_t n_seq = 0, seq_len = 0;
  CalibOptions options;
  std::optional<Pattern> packed_pattern;  // the pattern of the repacked form (none when dense)
  bool full_hessian = false;
  std::vector<float> hidden, work;  // the block's inputs (all calibration tokens), and its scratch copy
  std::vector<float> dense_hidden;  // CalibOptions::dense_targets: the dense model's block inputs (12.4)
  int64_t done = 0;
  CalibReport report;
  Clock::time_point started;
  BlockPermutation perm;  // the current block's (docs/design.md 12.2)

  bool calibrated() const {
    return needs_calibration_passes(options.method, options.refit_steps, options.swaps, dense_targets());
  }
  bool dense_targets() const { return options.dense_targets > 0; }
  bool selected(int64_t b, const std::string& name) const {
    return !options.selected || options.selected(tensor_name(b, name));
  }

  AdmmOptions admm_options() const {
    AdmmOptions o = options.admm;
    o.damping = options.sparsegpt.damping;
    return o;
  }
  Status run_block();
  Status stats_pass(int64_t b, const LinearHook& hook);
  // CalibOptions::dense_targets: one chunk's dense inputs of each linear input, by reader names.
  struct Captured {
    std::vector<std::string> names;
    int64_t K = 0;
    std::vector<float> rows;
    int64_t used = 0;  // rows the pruned pass has paired so far
  };
  std::vector<Captured> captured;
  Status choose_permutation(int64_t b, std::vector<GroupStats>& groups);
  Status unselected_back(int64_t b, std::vector<Tensor>& weights) const;
  Status prune_linear(int64_t b, const std::string& name, const GroupStats* g, const std::vector<double>& H,
                      const std::vector<double>& C, const InverseCholesky& factor, const AdmmFactor& admm,
                      double chol_share, Tensor& out);
};

ModelCalibrator::ModelCalibrator(std::unique_ptr<State> state) : state_(std::move(state)) {}
ModelCalibrator::ModelCalibrator(ModelCalibrator&&) noexcept = default;
ModelCalibrator& ModelCalibrator::operator=(ModelCalibrator&&) noexcept = default;
ModelCalibrator::~ModelCalibrator() = default;

Result<ModelCalibrator> ModelCalibrator::start(LlamaModel& model, std::vector<int32_t> tokens, int64_t n_seq,
                                               int64_t seq_len, CalibOptions options) {
  auto s = std::make_unique<State>();
  s->started = Clock::now();
  s->model = &model;
  s->n_seq = n_seq;
  s->seq_len = seq_len;
  s->options = std::move(options);
  s->report.n_seq = n_seq;
  s->report.seq_len = seq_len;
  s->report.refit_steps = s->options.refit_steps;
  s->report.swaps = s->options.swaps;
  s->report.dense_targets = s->options.dense_targets;
  if (s->options.format != CalibLinearFormat::Dense) s->packed_pattern = s->options.pattern;
  if (s->options.permute || s->options.permute_inputs) NMKIT_TRY(check_permutable(model.params()));
  if (s->options.permute_inputs && (s->options.format != CalibLinearFormat::Dense || s->options.on_pruned)) {
    return Error("calibration: permuted inputs (a measurement, CalibOptions::permute_inputs) leave masks that are "
                 "N:M only in the searched order: dense format only, and nothing written");
  }
  if (s->options.selected && s->options.format != CalibLinearFormat::Dense) {
    // A block's linears are packed in one form: a linear left unpruned does not have the pattern.
    return Error("calibration: a selection of linears (CalibOptions::selected) needs the dense format");
  }
  s->full_hessian = s->options.method == CalibMethod::SparseGpt || s->options.method == CalibMethod::Admm ||
                    s->options.refit_steps > 0 || s->options.swaps || s->dense_targets();
  if (!(s->options.dense_targets >= 0 && s->options.dense_targets <= 1)) {
    return Error(ErrorCode::InvalidArgument, "calibration: the strength of the dense targets is " +
                                                 calib_detail::num(s->options.dense_targets) + ", outside 0..1");
  }
  if (s->dense_targets() && s->options.permute_inputs) {
    return Error("calibration: dense targets and permuted inputs (a measurement) do not combine");
  }
  if (s->calibrated()) {
    const int64_t n = n_seq * seq_len, d = model.params().n_embd;
    if (n_seq < 1 || seq_len < 1 || static_cast<int64_t>(tokens.size()) != n) {
      return Error("calibration: expected " + std::to_string(n_seq) + " x " + std::to_string(seq_len) +
                   " tokens, got " + std::to_string(tokens.size()));
    }
    s->tokens = std::move(tokens);
    s->hidden.resize(static_cast<size_t>(n * d));
    s->work.resize(static_cast<size_t>(n * d));
    const auto t0 = Clock::now();
    NMKIT_TRY(model.embed(s->tokens.data(), n, s->hidden.data()));
    if (s->dense_targets()) s->dense_hidden = s->hidden;
    s->report.seconds.forward += seconds_since(t0);
  }
  return ModelCalibrator(std::move(s));
}

int64_t ModelCalibrator::blocks_done() const { return state_->done; }
bool ModelCalibrator::done() const { return state_->done == state_->model->params().n_layer; }

Status ModelCalibrator::next_block() {
  if (done()) return Error("calibration: every block is done");
  NMKIT_TRY(state_->run_block());
  ++state_->done;
  state_->report.seconds.total = seconds_since(state_->started);
  return invoke_callback(state_->options.on_block, "calibration progress", state_->done - 1,
                         state_->model->params().n_layer);
}

CalibReport ModelCalibrator::report() const { return state_->report; }

// Prunes block b's linear `name` into `out` by the method (g: its input's statistics, null for
// magnitude without refit; H, factor: the Hessian and SparseGPT's factor when computed).
Status ModelCalibrator::State::prune_linear(int64_t b, const std::string& name, const GroupStats* g,
                                            const std::vector<double>& H, const std::vector<double>& C,
                                            const InverseCholesky& factor, const AdmmFactor& admm,
                                            double chol_share, Tensor& out) {
  CalibTimes& times = report.seconds;
  const std::string full = tensor_name(b, name);
  auto loaded = model->load_dense_weight(b, name);
  if (!loaded.ok()) return loaded.error();
  Tensor moved = permute_block_linear(model->params(), perm, name, std::move(*loaded));
  const bool columns_moved = g != nullptr && g->columns_moved && !g->order.empty();
  if (columns_moved) moved = permute_columns(moved.view(), g->order);
  if (!C.empty()) {  // 12.4: the weight that gives the dense outputs from the pruned inputs
    const auto tt = Clock::now();
    auto target = retarget_to_dense(moved.view(), C.data(), H.data(), g->stats->K(), options.dense_targets,
                                    options.sparsegpt.damping, full);
    if (!target.ok()) return target.error();
    moved = std::move(*target);
    times.retarget += seconds_since(tt);
  }
  const TensorView w = moved.view();
  LinearReport lr;
  lr.block = b;
  lr.name = full;
  Tensor pruned;
  const auto tp = Clock::now();
  if (options.method == CalibMethod::SparseGpt) {
    auto r = sparsegpt_prune_with(w, factor, options.pattern, options.sparsegpt, full);
    if (!r.ok()) return r.error();
    lr.sums = r->sums;
    lr.weight_relative_error = r->weight_relative_error;
    lr.damping = factor.damping;
    lr.dead_inputs = r->dead_inputs;
    pruned = std::move(r->pruned);
  } else if (options.method == CalibMethod::Admm) {
    auto r = admm_prune_with(w, admm, options.pattern, admm_options(), full);
    if (!r.ok()) return r.error();
    lr.sums = r->sums;
    lr.weight_relative_error = r->weight_relative_error;
    lr.damping = admm.damping;
    lr.dead_inputs = r->dead_inputs;
    pruned = std::move(r->pruned);
  } else if (options.method == CalibMethod::Wanda) {
    std::vector<float> norms = g->stats->act_norms();
    if (!g->order.empty()) {
      std::vector<float> moved_norms(norms.size());
      for (size_t k = 0; k < norms.size(); ++k) moved_norms[k] = norms[static_cast<size_t>(g->order[k])];
      norms = std::move(moved_norms);
    }
    auto r = wanda_prune(w, norms, options.pattern, full);
    if (!r.ok()) return r.error();
    lr.sums = r->sums;
    lr.weight_relative_error = metrics_from(r->sums).relative_error;
    pruned = std::move(r->pruned);
  } else {
    auto r = prune(w, options.pattern, PruneMethod::Magnitude, {}, full);
    if (!r.ok()) return r.error();
    lr.sums = r->sums;
    lr.weight_relative_error = metrics_from(r->sums).relative_error;
    pruned = std::move(r->pruned);
  }
  const double prune_seconds = seconds_since(tp);
  times.prune += prune_seconds;
  lr.seconds = prune_seconds + chol_share;
  if (options.swaps) {
    const auto ts = Clock::now();
    SwapOptions so;
    so.damping = options.sparsegpt.damping;
    auto swapped = swap_in_groups(w, pruned, H.data(), options.pattern, so, full);
    if (!swapped.ok()) return swapped.error();
    lr.sums = swapped->sums;
    lr.swaps = swapped->swaps;
    lr.weight_relative_error = relative_difference(w, pruned);
    const double swap_seconds = seconds_since(ts);
    times.swap += swap_seconds;
    lr.seconds += swap_seconds;
  }
  if (options.refit_steps > 0) {
    if (options.output_error) {
      const auto te = Clock::now();
      auto before = output_error(w, pruned.view(), H.data());
      if (!before.ok()) return before.error().with_context(full + ": ");
      lr.refit_before = *before;
      times.error += seconds_since(te);
    }
    const auto tr = Clock::now();
    auto refit = reconstruct_kept(w, pruned, H.data(), options.refit_steps, options.sparsegpt.damping, full);
    if (!refit.ok()) return refit.error();
    const double refit_seconds = seconds_since(tr);
    times.refit += refit_seconds;
    lr.seconds += refit_seconds;
    lr.weight_relative_error = relative_difference(w, pruned);
  }
  if (!H.empty() && options.output_error) {
    const auto te = Clock::now();
    auto e = output_error(w, pruned.view(), H.data());
    if (!e.ok()) return e.error().with_context(full + ": ");
    lr.output_error = *e;
    lr.error_tokens = full_hessian ? g->stats->tokens() : g->error_stats ? g->error_stats->tokens() : 0;
    times.error += seconds_since(te);
  }
  out = pruned.dtype() == DType::F32 ? std::move(pruned) : Tensor::from_f32(pruned.to_f32(), pruned.shape());
  if (columns_moved) {  // back to the model's input order: new column order[j] = column j
    ChannelOrder back(g->order.size());
    for (size_t j = 0; j < back.size(); ++j) back[static_cast<size_t>(g->order[j])] = static_cast<int32_t>(j);
    out = permute_columns(out.view(), back);
  }
  report.linears.push_back(std::move(lr));
  return ok_status();
}

Status ModelCalibrator::State::run_block() {
  const int64_t b = done;
  const LlamaParams& p = model->params();
  CalibTimes& times = report.seconds;
  const auto& linear_names = LlamaModel::block_linear_names();
  std::vector<Tensor> pruned(linear_names.size());
  const size_t first_report = report.linears.size();
  perm = BlockPermutation{};

  if (!calibrated()) {  // magnitude: no statistics, no pass
    std::vector<GroupStats> none;
    NMKIT_TRY(choose_permutation(b, none));
    NMKIT_TRY(unselected_back(b, pruned));
    for (size_t i = 0; i < linear_names.size(); ++i) {
      if (selected(b, linear_names[i])) NMKIT_TRY(prune_linear(b, linear_names[i], nullptr, {}, {}, {}, {}, 0, pruned[i]));
    }
  } else {
    std::vector<GroupStats> groups;
    double hook_seconds = 0;
    const LinearHook hook = [&](const LinearInput& in) -> Status {
      const auto th = Clock::now();
      // A non-finite input (float32 overflow in an earlier layer) would make H non-finite; it is
      // named here, with the layer that reads it, before the linear itself refuses it.
      for (int64_t i = 0; i < in.tokens * in.K; ++i) {
        if (!std::isfinite(in.x[i])) {
          return Error("layer '" + tensor_name(b, in.names.front()) + "': calibration input at token " +
                       std::to_string(i / in.K) + ", feature " + std::to_string(i % in.K) + " is " +
                       (std::isnan(in.x[i]) ? "nan" : in.x[i] > 0 ? "inf" : "-inf"));
        }
      }
      GroupStats* g = nullptr;
      for (GroupStats& existing : groups) {
        if (existing.names == in.names) g = &existing;
      }
      if (g == nullptr) {
        groups.push_back(GroupStats{in.names, std::make_unique<InputStats>(in.K, full_hessian), nullptr, nullptr, {}});
        g = &groups.back();
        if (!full_hessian && options.output_error && options.wanda_error_tokens > 0) {
          g->error_stats = std::make_unique<InputStats>(in.K, true);
        }
      }
      g->stats->add(in.x, in.tokens);
      if (dense_targets()) {
        if (!g->cross) g->cross = std::make_unique<CrossStats>(in.K);
        auto c = std::find_if(captured.begin(), captured.end(), [&](const Captured& e) { return e.names == in.names; });
        if (c == captured.end() || c->K != in.K || c->used + in.tokens > static_cast<int64_t>(c->rows.size()) / in.K) {
          return Error("calibration: the dense pass of block " + std::to_string(b) + " did not give the inputs of " +
                       in.names.front() + " that the pruned pass reads");
        }
        g->cross->add(c->rows.data() + c->used * in.K, in.x, in.tokens);
        c->used += in.tokens;
      }
      if (g->error_stats) {
        const int64_t room = options.wanda_error_tokens - g->error_stats->tokens();
        if (room > 0) g->error_stats->add(in.x, std::min(room, in.tokens));
      }
      hook_seconds += seconds_since(th);
      return ok_status();
    };
    std::copy(hidden.begin(), hidden.end(), work.begin());
    auto t0 = Clock::now();
    if (dense_targets()) {
      NMKIT_TRY(stats_pass(b, hook));
    } else {
      NMKIT_TRY(model->run_block(b, work.data(), n_seq, seq_len, hook));
    }
    times.forward += seconds_since(t0) - hook_seconds;
    times.stats += hook_seconds;
    for (const std::string& name : linear_names) {
      const bool seen = std::any_of(groups.begin(), groups.end(), [&](const GroupStats& g) {
        return std::find(g.names.begin(), g.names.end(), name) != g.names.end();
      });
      if (!seen) return Error("calibration: block " + std::to_string(b) + " never ran linear " + name);
    }
    NMKIT_TRY(choose_permutation(b, groups));
    NMKIT_TRY(unselected_back(b, pruned));
    for (GroupStats& g : groups) {
      if (std::none_of(g.names.begin(), g.names.end(), [&](const std::string& name) { return selected(b, name); })) {
        continue;  // no Hessian for a group left as it is
      }
      std::vector<double> H, C;
      InverseCholesky factor;
      AdmmFactor admm;
      double chol_share = 0;
      // Taken, not copied: the stats are done once the block's pass is (one K x K buffer less).
      if (full_hessian) H = permute_symmetric(g.stats->take_hessian(), g.stats->K(), g.order);
      // C's rows (dense channels) and columns (pruned channels) follow the same order as H's.
      if (g.cross) C = permute_symmetric(g.cross->take(), g.stats->K(), g.order);
      if (options.method == CalibMethod::SparseGpt) {
        const auto tc = Clock::now();
        auto f = inverse_cholesky(H.data(), g.stats->K(), options.sparsegpt.damping, tensor_name(b, g.names.front()));
        if (!f.ok()) return f.error();
        factor = std::move(*f);
        const double chol = seconds_since(tc);
        times.cholesky += chol;
        chol_share = chol / static_cast<double>(g.names.size());
      } else if (options.method == CalibMethod::Admm) {
        const auto tc = Clock::now();
        auto f = admm_factor(H.data(), g.stats->K(), admm_options(), tensor_name(b, g.names.front()));
        if (!f.ok()) return f.error();
        admm = std::move(*f);
        const double chol = seconds_since(tc);
        times.cholesky += chol;
        chol_share = chol / static_cast<double>(g.names.size());
      } else if (g.error_stats) {
        H = permute_symmetric(g.error_stats->take_hessian(), g.stats->K(), g.order);
      }
      for (const std::string& name : g.names) {
        if (!selected(b, name)) continue;
        const auto i = static_cast<size_t>(std::find(linear_names.begin(), linear_names.end(), name) -
                                           linear_names.begin());
        NMKIT_TRY(prune_linear(b, name, &g, H, C, factor, admm, chol_share, pruned[i]));
      }
    }
  }
  // The block's linears repacked once, in their final form; the pruned weights leave for the writer.
  const auto tk = Clock::now();
  std::vector<TensorView> views;
  for (const Tensor& t : pruned) views.push_back(t.view());
  NMKIT_TRY(model->replace_block(b, views, options.format, packed_pattern));
  times.pack += seconds_since(tk);
  std::optional<Tensor> moved_bias;  // the v bias follows v's rows (12.2)
  if (!perm.value.empty()) {
    auto bias = model->block_vector(b, "attn_v.bias");
    if (!bias.ok()) return bias.error();
    if (bias->data != nullptr && bias->shape.size() == 1) {
      moved_bias = permute_rows(TensorView{DType::F32, {bias->numel(), 1}, bias->data}, perm.value);
      const TensorView flat{DType::F32, {bias->numel()}, moved_bias->data()};
      NMKIT_TRY(model->replace_block_vector(b, "attn_v.bias", flat));
    }
  }
  if (calibrated() && b + 1 < p.n_layer) {  // the pruned block gives the next one its inputs
    const auto t0 = Clock::now();
    NMKIT_TRY(model->run_block(b, hidden.data(), n_seq, seq_len));
    times.forward += seconds_since(t0);
  }
  // Report the block's linears in the model's order.
  std::stable_sort(report.linears.begin() + static_cast<std::ptrdiff_t>(first_report), report.linears.end(),
                   [&](const LinearReport& a, const LinearReport& c) {
                     auto index = [&](const std::string& full) {
                       for (size_t i = 0; i < linear_names.size(); ++i) {
                         if (full == tensor_name(b, linear_names[i])) return i;
                       }
                       return linear_names.size();
                     };
                     return index(a.name) < index(c.name);
                   });
  if (options.on_pruned) {
    std::vector<NamedTensor> out;
    for (size_t i = 0; i < linear_names.size(); ++i) out.push_back({tensor_name(b, linear_names[i]), std::move(pruned[i])});
    if (moved_bias) {
      const int64_t n = moved_bias->numel();
      out.push_back({"blk." + std::to_string(b) + ".attn_v.bias", Tensor::from_f32(std::vector<float>(moved_bias->as<float>(), moved_bias->as<float>() + n), {n})});
    }
    NMKIT_TRY(options.on_pruned(b, std::move(out)));
  }
  return ok_status();
}

// The statistics pass with dense targets (docs/design.md 12.4): chunk by chunk of sequences, block b
// (its weights still dense) runs on the dense model's hidden states, keeping its linears' inputs,
// then on the pruned model's (`work`) with `hook`, which pairs each input with the dense one of the
// same tokens. The dense pass leaves the next block's dense inputs in dense_hidden. A chunk is the
// tokens one run_block group holds, so the kept inputs stay as bounded as its scratch.
Status ModelCalibrator::State::stats_pass(int64_t b, const LinearHook& hook) {
  const int64_t d = model->params().n_embd;
  const int64_t chunk = std::max<int64_t>(1, LlamaModel::kBlockGroupTokens / seq_len);
  const LinearHook capture = [&](const LinearInput& in) -> Status {
    auto c = std::find_if(captured.begin(), captured.end(), [&](const Captured& e) { return e.names == in.names; });
    if (c == captured.end()) {
      captured.push_back(Captured{in.names, in.K, {}, 0});
      c = captured.end() - 1;
    }
    c->rows.insert(c->rows.end(), in.x, in.x + in.tokens * in.K);
    return ok_status();
  };
  for (int64_t first = 0; first < n_seq; first += chunk) {
    const int64_t m = std::min(chunk, n_seq - first);
    for (Captured& c : captured) {
      c.rows.clear();
      c.used = 0;
    }
    const size_t at = static_cast<size_t>(first * seq_len * d);
    NMKIT_TRY(model->run_block(b, dense_hidden.data() + at, m, seq_len, capture));
    NMKIT_TRY(model->run_block(b, work.data() + at, m, seq_len, hook));
    for (const Captured& c : captured) {
      if (c.used * c.K != static_cast<int64_t>(c.rows.size())) {
        return Error("calibration: the pruned pass of block " + std::to_string(b) + " read fewer inputs of " +
                     c.names.front() + " than the dense pass gave");
      }
    }
  }
  captured.clear();
  return ok_status();
}

// The linears not selected go back as they are, under the block's permutation.
Status ModelCalibrator::State::unselected_back(int64_t b, std::vector<Tensor>& weights) const {
  const auto& linear_names = LlamaModel::block_linear_names();
  for (size_t i = 0; i < linear_names.size(); ++i) {
    if (selected(b, linear_names[i])) continue;
    auto kept = model->load_dense_weight(b, linear_names[i]);
    if (!kept.ok()) return kept.error();
    weights[i] = permute_block_linear(model->params(), perm, linear_names[i], std::move(*kept));
  }
  return ok_status();
}

// Block b's permutation (docs/design.md 12.2), chosen before any of its linears is pruned: the
// consumers' input statistics (groups; none for magnitude) give the method's score, and the
// consumers' groups take the order their inputs now come in.
Status ModelCalibrator::State::choose_permutation(int64_t b, std::vector<GroupStats>& groups) {
  if (!options.permute && !options.permute_inputs) return ok_status();
  const auto t0 = Clock::now();
  auto stats_of = [&](const std::string& name) -> const InputStats* {
    for (const GroupStats& g : groups) {
      if (std::find(g.names.begin(), g.names.end(), name) != g.names.end()) return g.stats.get();
    }
    return nullptr;
  };
  calib_detail::ConsumerStats down{options.permute && selected(b, "ffn_down"), stats_of("ffn_down")};
  calib_detail::ConsumerStats output{options.permute && selected(b, "attn_output"), stats_of("attn_output")};
  auto chosen = calib_detail::choose_block_permutation(*model, b, options, down, output, report.permutations);
  if (!chosen.ok()) return chosen.error();
  perm = std::move(*chosen);
  for (GroupStats& g : groups) {
    if (g.names == std::vector<std::string>{"ffn_down"}) g.order = perm.ffn;
    if (g.names == std::vector<std::string>{"attn_output"}) g.order = output_columns(model->params(), perm.value);
  }
  for (GroupStats& g : groups) {
    if (!options.permute_inputs || g.names.size() < 2) continue;  // q/k/v and gate/up read one input each
    auto order = calib_detail::choose_input_order(*model, b, options, g.names, g.stats.get(),
                                                  [&](const std::string& n) { return selected(b, n); },
                                                  report.permutations);
    if (!order.ok()) return order.error();
    g.order = std::move(*order);
    g.columns_moved = true;
  }
  report.seconds.permute += seconds_since(t0);
  return ok_status();
}

Result<CalibReport> calibrate_and_prune(LlamaModel& model, const std::vector<int32_t>& tokens, int64_t n_seq,
                                        int64_t seq_len, const CalibOptions& options) {
  auto calibrator = ModelCalibrator::start(model, tokens, n_seq, seq_len, options);
  if (!calibrator.ok()) return calibrator.error();
  while (!calibrator->done()) NMKIT_TRY(calibrator->next_block());
  return calibrator->report();
}

}  // namespace nmkit
