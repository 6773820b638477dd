// The block-by-block calibration driver (docs/design.md section 12); see nmkit/calib_model.h.
#include "nmkit/calib_model.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <memory>

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string tensor_name(int64_t b, std::string_view linear) {
  return "blk." + std::to_string(b) + "." + std::string(linear) + ".weight";
}

// The statistics of one input shared by the linears `names` of a block.
struct GroupStats {
  std::vector<std::string> names;
  std::unique_ptr<InputStats> stats;        // norms (Wanda), Hessian (SparseGPT)
  std::unique_ptr<InputStats> error_stats;  // Wanda: Hessian of the first tokens, for the error
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
  return Error(ErrorCode::InvalidArgument, "unknown pruning method '" + std::string(text) +
               "' (expected magnitude, wanda or sparsegpt)");
}

std::string_view calib_method_name(CalibMethod method) {
  switch (method) {
    case CalibMethod::Magnitude: return "magnitude";
    case CalibMethod::Wanda: return "wanda";
    case CalibMethod::SparseGpt: return "sparsegpt";
  }
  return "unknown";
}

bool needs_calibration(CalibMethod method) { return method != CalibMethod::Magnitude; }

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

Result<CalibReport> calibrate_and_prune(LlamaModel& model, const std::vector<int32_t>& tokens,
                                        int64_t n_seq, int64_t seq_len, const CalibOptions& options) {
  const auto t_start = Clock::now();
  const LlamaParams& p = model.params();
  CalibReport report;
  report.n_seq = n_seq;
  report.seq_len = seq_len;
  report.refit_steps = options.refit_steps;
  CalibTimes& times = report.seconds;
  const auto& linear_names = LlamaModel::block_linear_names();
  const std::optional<Pattern> packed_pattern =
      options.format == CalibLinearFormat::Dense ? std::nullopt : std::optional<Pattern>(options.pattern);

  // Linears sharing an input are packed together (q/k/v, gate/up), so a block's linears are put
  // back dense-masked one by one and packed in `options.format` once all of them are pruned.
  auto replace = [&](int64_t b, const std::string& name, const Tensor& pruned) -> Status {
    const auto t0 = Clock::now();
    Tensor f32 = pruned.dtype() == DType::F32 ? Tensor() : Tensor::from_f32(pruned.to_f32(), pruned.shape());
    const TensorView view = pruned.dtype() == DType::F32 ? pruned.view() : f32.view();
    Status st = model.replace_linear(b, name, view, CalibLinearFormat::Dense);
    times.pack += seconds_since(t0);
    return st;
  };
  auto pack_block = [&](int64_t b) -> Status {
    if (options.format == CalibLinearFormat::Dense) return ok_status();
    const auto t0 = Clock::now();
    for (const std::string& name : linear_names) {
      auto w = model.dense_weight(b, name);
      if (!w.ok()) return w.error();
      const Tensor copy = Tensor::copy_of(*w);
      NMKIT_TRY(model.replace_linear(b, name, copy.view(), options.format, packed_pattern));
    }
    times.pack += seconds_since(t0);
    return ok_status();
  };

  if (options.method == CalibMethod::Magnitude && options.refit_steps == 0) {
    for (int64_t b = 0; b < p.n_layer; ++b) {
      for (const std::string& name : linear_names) {
        const auto t0 = Clock::now();
        auto w = model.dense_weight(b, name);
        if (!w.ok()) return w.error();
        const std::string full = tensor_name(b, name);
        auto pruned = prune(*w, options.pattern, PruneMethod::Magnitude, {}, full);
        if (!pruned.ok()) return pruned.error();
        LinearReport lr;
        lr.block = b;
        lr.name = full;
        lr.sums = pruned->sums;
        lr.weight_relative_error = metrics_from(pruned->sums).relative_error;
        lr.seconds = seconds_since(t0);
        times.prune += lr.seconds;
        NMKIT_TRY(replace(b, name, pruned->pruned));
        report.linears.push_back(std::move(lr));
      }
      NMKIT_TRY(pack_block(b));
      NMKIT_TRY(invoke_callback(options.on_block, "calibration progress", b, p.n_layer));
    }
    times.total = seconds_since(t_start);
    return report;
  }

  const int64_t n = n_seq * seq_len, d = p.n_embd;
  if (n_seq < 1 || seq_len < 1 || static_cast<int64_t>(tokens.size()) != n) {
    return Error("calibration: expected " + std::to_string(n_seq) + " x " + std::to_string(seq_len) +
                 " tokens, got " + std::to_string(tokens.size()));
  }
  std::vector<float> hidden(static_cast<size_t>(n * d)), work(static_cast<size_t>(n * d));
  auto t0 = Clock::now();
  NMKIT_TRY(model.embed(tokens.data(), n, hidden.data()));
  times.forward += seconds_since(t0);
  const bool sparsegpt = options.method == CalibMethod::SparseGpt;
  const bool full_hessian = sparsegpt || options.refit_steps > 0;

  for (int64_t b = 0; b < p.n_layer; ++b) {
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
        groups.push_back(GroupStats{in.names, std::make_unique<InputStats>(in.K, full_hessian), nullptr});
        g = &groups.back();
        if (!full_hessian && options.wanda_error_tokens > 0) {
          g->error_stats = std::make_unique<InputStats>(in.K, true);
        }
      }
      g->stats->add(in.x, in.tokens);
      if (g->error_stats) {
        const int64_t room = options.wanda_error_tokens - g->error_stats->tokens();
        if (room > 0) g->error_stats->add(in.x, std::min(room, in.tokens));
      }
      hook_seconds += seconds_since(th);
      return ok_status();
    };
    std::copy(hidden.begin(), hidden.end(), work.begin());
    t0 = Clock::now();
    NMKIT_TRY(model.run_block(b, work.data(), n_seq, seq_len, hook));
    times.forward += seconds_since(t0) - hook_seconds;
    times.stats += hook_seconds;

    for (const std::string& name : linear_names) {
      const GroupStats* g = nullptr;
      for (const GroupStats& existing : groups) {
        if (std::find(existing.names.begin(), existing.names.end(), name) != existing.names.end()) {
          g = &existing;
        }
      }
      if (g == nullptr) return Error("calibration: block " + std::to_string(b) + " never ran linear " + name);
    }

    for (const GroupStats& g : groups) {
      const std::string group_name = tensor_name(b, g.names.front());
      std::vector<double> H;
      InverseCholesky factor;
      double chol_share = 0;
      if (full_hessian) H = g.stats->hessian();
      if (sparsegpt) {
        const auto tc = Clock::now();
        auto f = inverse_cholesky(H.data(), g.stats->K(), options.sparsegpt.damping, group_name);
        if (!f.ok()) return f.error();
        factor = std::move(*f);
        const double chol = seconds_since(tc);
        times.cholesky += chol;
        chol_share = chol / static_cast<double>(g.names.size());
      } else if (g.error_stats) {
        H = g.error_stats->hessian();
      }
      const int64_t error_tokens = full_hessian ? g.stats->tokens() : g.error_stats ? g.error_stats->tokens() : 0;
      const std::vector<float> norms = sparsegpt ? std::vector<float>() : g.stats->act_norms();
      for (const std::string& name : g.names) {
        const std::string full = tensor_name(b, name);
        auto w = model.dense_weight(b, name);
        if (!w.ok()) return w.error();
        LinearReport lr;
        lr.block = b;
        lr.name = full;
        Tensor pruned;
        const auto tp = Clock::now();
        if (sparsegpt) {
          auto r = sparsegpt_prune_with(*w, factor, options.pattern, options.sparsegpt, full);
          if (!r.ok()) return r.error();
          lr.sums = r->sums;
          lr.weight_relative_error = r->weight_relative_error;
          lr.damping = factor.damping;
          lr.dead_inputs = r->dead_inputs;
          pruned = std::move(r->pruned);
        } else if (options.method == CalibMethod::Wanda) {
          auto r = wanda_prune(*w, norms, options.pattern, full);
          if (!r.ok()) return r.error();
          lr.sums = r->sums;
          lr.weight_relative_error = metrics_from(r->sums).relative_error;
          pruned = std::move(r->pruned);
        } else {
          auto r = prune(*w, options.pattern, PruneMethod::Magnitude, {}, full);
          if (!r.ok()) return r.error();
          lr.sums = r->sums;
          lr.weight_relative_error = metrics_from(r->sums).relative_error;
          pruned = std::move(r->pruned);
        }
        const double prune_seconds = seconds_since(tp);
        times.prune += prune_seconds;
        lr.seconds = prune_seconds + chol_share;
        if (options.refit_steps > 0) {
          auto before = output_error(*w, pruned.view(), H.data());
          if (!before.ok()) return before.error().with_context(full + ": ");
          lr.refit_before = *before;
          const auto tr = Clock::now();
          auto refit = reconstruct_kept(*w, pruned, H.data(), options.refit_steps,
                                        options.sparsegpt.damping, full);
          if (!refit.ok()) return refit.error();
          const double refit_seconds = seconds_since(tr);
          times.refit += refit_seconds;
          lr.seconds += refit_seconds;
          lr.weight_relative_error = relative_difference(*w, pruned);
        }
        if (!H.empty()) {
          const auto te = Clock::now();
          auto e = output_error(*w, pruned.view(), H.data());
          if (!e.ok()) return e.error().with_context(full + ": ");
          lr.output_error = *e;
          lr.error_tokens = error_tokens;
          times.error += seconds_since(te);
        }
        NMKIT_TRY(replace(b, name, pruned));
        report.linears.push_back(std::move(lr));
      }
    }
    NMKIT_TRY(pack_block(b));
    if (b + 1 < p.n_layer) {  // the pruned block gives the next one its inputs
      t0 = Clock::now();
      NMKIT_TRY(model.run_block(b, hidden.data(), n_seq, seq_len));
      times.forward += seconds_since(t0);
    }
    NMKIT_TRY(invoke_callback(options.on_block, "calibration progress", b, p.n_layer));
  }
  // Report the linears in the model's order within each block.
  std::stable_sort(report.linears.begin(), report.linears.end(),
                   [&](const LinearReport& a, const LinearReport& c) {
                     if (a.block != c.block) return a.block < c.block;
                     auto index = [&](const std::string& full) {
                       for (size_t i = 0; i < linear_names.size(); ++i) {
                         if (full == tensor_name(a.block, linear_names[i])) return i;
                       }
                       return linear_names.size();
                     };
                     return index(a.name) < index(c.name);
                   });
  times.total = seconds_since(t_start);
  return report;
}

}  // namespace nmkit
