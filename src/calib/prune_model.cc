// Pruning a model file end to end (include/nmkit/prune_model.h).
#include "nmkit/prune_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "calib/method_common.h"
#include "core/system_memory.h"
#include "io/mapped_file.h"
#include "nmkit/model_write.h"
#include "nmkit/text_file.h"

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;

CalibOptions calib_options(const CalibTextOptions& o) {
  CalibOptions options;
  options.pattern = o.pattern;
  options.method = o.method;
  options.format = o.format;
  options.refit_steps = o.refit_steps;
  options.swaps = o.swaps;
  options.dense_targets = o.dense_targets;
  options.admm = o.admm;
  options.wanda_error_tokens = o.wanda_error_tokens;
  options.output_error = o.output_error;
  options.on_block = o.on_block;
  options.selected = o.selected;
  options.permute = o.permute;
  options.permute_inputs = o.permute_inputs;
  return options;
}

bool calibrated(const CalibTextOptions& o) {
  return needs_calibration_passes(o.method, o.refit_steps, o.swaps, o.dense_targets > 0);
}
// Whether prune_model_to builds the model and runs the calibrator: every calibrated method, and
// magnitude with --permute (the permutation of a block is chosen before its linears are written).
bool builds_model(const CalibTextOptions& o) { return calibrated(o) || o.permute; }

// The calibration tokens (n_seq sequences of o.seq_len) of `o`'s text for a model of `params`, the
// text's path and size in `run`; none for a method that needs no text.
Status calibration_tokens(const LlamaParams& params, const Tokenizer* tokenizer, const CalibTextOptions& o,
                          CalibRun& run, std::vector<int32_t>& tokens, int64_t& n_seq) {
  n_seq = 0;
  if (!(o.dense_targets >= 0 && o.dense_targets <= 1)) {  // before the text is read (the calibrator checks too)
    return Error(ErrorCode::InvalidArgument, "calibration: the strength of the dense targets is " +
                                                 calib_detail::num(o.dense_targets) + ", outside 0..1");
  }
  if (!calibrated(o)) return ok_status();
  if (o.n_seq < 1 || o.seq_len < 1) {
    return Error(ErrorCode::InvalidArgument, "calibration sequences and their length must be >= 1, got " +
                                                 std::to_string(o.n_seq) + " and " + std::to_string(o.seq_len));
  }
  if (o.seq_len > params.n_ctx_train && params.n_ctx_train > 0) {
    return Error(ErrorCode::InvalidArgument, "calibration length " + std::to_string(o.seq_len) +
                                                 " exceeds the model's context length " +
                                                 std::to_string(params.n_ctx_train));
  }
  if (tokenizer == nullptr) return Error(ErrorCode::InvalidArgument, "calibration needs the model's tokenizer");
  if (o.text_path.empty()) {
    return Error(ErrorCode::InvalidArgument, std::string(calib_method_name(o.method)) + " needs a calibration text");
  }
  auto text = TextFile::open("calibration text", o.text_path);
  if (!text.ok()) return text.error();
  run.text_path = o.text_path;
  auto ids = tokenize_text(*text, *tokenizer, 0);  // the windows spread over the whole text
  if (!ids.ok()) return ids.error();
  run.text_tokens = static_cast<int64_t>(ids->ids.size());
  auto seqs = calibration_sequences(ids->ids, o.n_seq, o.seq_len, o.text_path);
  if (!seqs.ok()) return seqs.error();
  tokens = std::move(*seqs);
  n_seq = static_cast<int64_t>(tokens.size()) / o.seq_len;
  return ok_status();
}

}  // namespace

Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, const CalibTextOptions& o) {
  CalibRun run;
  std::vector<int32_t> tokens;
  int64_t n_seq = 0;
  NMKIT_TRY(calibration_tokens(model.params(), tokenizer, o, run, tokens, n_seq));
  auto report = calibrate_and_prune(model, tokens, n_seq, o.seq_len, calib_options(o));
  if (!report.ok()) return report.error();
  run.report = std::move(*report);
  return run;
}

Status check_pruned_model_output(const std::string& input, const std::string& output, DType dtype,
                                 const std::vector<FileRole>& other_inputs, const std::vector<FileRole>& other_outputs,
                                 const std::string& label) {
  auto source = ModelSource::open(input);
  if (!source.ok()) return source.error();
  auto out = parse_model_output(output, dtype, *source, label);
  if (!out.ok()) return out.error();
  return check_model_output(*out, *source, other_inputs, other_outputs);
}

namespace {

// The block and linear index of a block linear's GGUF name (blk.B.attn_q.weight), nullopt for any
// other tensor.
std::optional<std::pair<int64_t, size_t>> block_linear(const std::string& name, int64_t n_layer) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return std::nullopt;
  int64_t b = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || b > n_layer) return std::nullopt;
    b = b * 10 + (name[i] - '0');
  }
  if (b >= n_layer) return std::nullopt;
  const std::string local = name.substr(dot + 1, name.size() - dot - 1 - 7);
  const auto& names = LlamaModel::block_linear_names();
  const auto it = std::find(names.begin(), names.end(), local);
  if (it == names.end()) return std::nullopt;
  return std::pair(b, static_cast<size_t>(it - names.begin()));
}

// The weight dtype the calibration model runs in: the file's where every block linear is stored
// F32 or BF16 in GGUF row order (read in place, no copy), else f32.
DType forward_dtype(const ModelSource& source) {
  std::optional<DType> common;
  for (int64_t b = 0; b < source.params().n_layer; ++b) {
    for (const std::string& linear : LlamaModel::block_linear_names()) {
      const auto stored = source.stored("blk." + std::to_string(b) + "." + linear + ".weight");
      if (!stored || (stored->type != GgmlType::F32 && stored->type != GgmlType::BF16)) return DType::F32;
      const DType dtype = stored->type == GgmlType::BF16 ? DType::BF16 : DType::F32;
      if (common && *common != dtype) return DType::F32;
      common = dtype;
    }
  }
  return common.value_or(DType::F32);
}

// docs/design.md 12: Wanda's passes default to bf16 weights (its statistics are sums of squares that
// bf16 passes leave as good, at about 0.6x the time of f32 ones); the other methods' to the file's.
DType pass_dtype(CalibMethod method, const ModelSource& source) {
  return method == CalibMethod::Wanda ? DType::BF16 : forward_dtype(source);
}

// What the writer's loader hands out as it writes a pruned model: every tensor from the source but
// the block linears, which come pruned, block by block (docs/design.md 12).
struct PruneStream {
  const ModelSource* source = nullptr;
  CalibTextOptions options;
  std::function<Status(const CalibRun&)> before_commit;
  std::optional<ModelCalibrator> calibrator;  // wanda, sparsegpt, refit, permute; else magnitude from the file
  std::map<std::string, Tensor> ready;        // pruned linears not yet written (blocks pulled ahead)
  std::vector<int> linears_out;               // magnitude: linears handed out per block
  int64_t blocks_out = 0;
  CalibRun run;
  bool complete = false;
  std::optional<Error> failure;  // the pruning's own error, reported without the writer's context
  Clock::time_point started = Clock::now();

  Result<Tensor> load(const std::string& name);
  Result<Tensor> magnitude(int64_t b, const std::string& name);
  Status finish();
};

Status PruneStream::finish() {
  complete = true;
  if (calibrator) {
    run.report = calibrator->report();
  } else {
    const auto& names = LlamaModel::block_linear_names();
    const auto order = [&names](const LinearReport& l) {
      const std::string local = l.name.substr(l.name.find('.', 4) + 1);
      return std::pair(l.block, std::find(names.begin(), names.end(), local.substr(0, local.size() - 7)) - names.begin());
    };
    std::stable_sort(run.report.linears.begin(), run.report.linears.end(),
                     [&](const LinearReport& a, const LinearReport& c) { return order(a) < order(c); });
    run.report.seconds.total = std::chrono::duration<double>(Clock::now() - started).count();
  }
  return before_commit ? before_commit(run) : ok_status();
}

// A value that is not finite, named as LlamaModel::build names it (magnitude builds no model).
Status check_finite_values(const Tensor& t, const std::string& name) {
  const float* v = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(v[i])) return Error(name + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
  }
  return ok_status();
}

// Magnitude (section 2) on the file's values as they are written, reported as ModelCalibrator does.
Result<Tensor> PruneStream::magnitude(int64_t b, const std::string& name) {
  auto w = source->load_f32(name);
  if (!w.ok()) return w.error();
  source->release(name);  // read once: its file pages leave the process (11.7)
  Tensor out = std::move(*w);
  NMKIT_TRY(check_finite_values(out, name));
  if (!options.selected || options.selected(name)) {
    const auto t0 = Clock::now();
    auto r = prune(out.view(), options.pattern, PruneMethod::Magnitude, {}, name);
    if (!r.ok()) return r.error();
    LinearReport lr;
    lr.block = b;
    lr.name = name;
    lr.sums = r->sums;
    lr.weight_relative_error = metrics_from(r->sums).relative_error;
    lr.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    run.report.seconds.prune += lr.seconds;
    run.report.linears.push_back(std::move(lr));
    out = r->pruned.dtype() == DType::F32 ? std::move(r->pruned) : Tensor::from_f32(r->pruned.to_f32(), r->pruned.shape());
  }
  const int64_t n_layer = source->params().n_layer;
  if (++linears_out[static_cast<size_t>(b)] == static_cast<int>(LlamaModel::block_linear_names().size())) {
    NMKIT_TRY(invoke_callback(options.on_block, "calibration progress", blocks_out++, n_layer));
    if (blocks_out == n_layer) NMKIT_TRY(finish());
  }
  return out;
}

Result<Tensor> PruneStream::load(const std::string& name) {
  const auto linear = block_linear(name, source->params().n_layer);
  if (!calibrator) {
    if (linear) return magnitude(linear->first, name);
    auto t = source->load_f32(name);
    source->release(name);
    if (t.ok()) NMKIT_TRY(check_finite_values(*t, name));
    return t;
  }
  // With permute, a v bias follows its block's value order (docs/design.md 12.2): it comes from the
  // calibrator, which hands it with the block's linears when it moved.
  const bool moved_vector = options.permute && name.starts_with("blk.") && name.ends_with(".attn_v.bias");
  if (!linear && !moved_vector) return source->load_f32(name);
  if (moved_vector) {
    const int64_t b = std::stoll(name.substr(4, name.find('.', 4) - 4));
    while (calibrator->blocks_done() <= b && !ready.contains(name)) {
      NMKIT_TRY(calibrator->next_block());
      if (calibrator->done()) NMKIT_TRY(finish());
    }
    if (!ready.contains(name)) return source->load_f32(name);  // the block's values did not move
  }
  // The calibrator runs on until the block holding `name` is done; blocks it passes wait here.
  while (!ready.contains(name)) {
    if (calibrator->done()) return Error("tensor '" + name + "' was already written");
    NMKIT_TRY(calibrator->next_block());
    if (calibrator->done()) NMKIT_TRY(finish());
  }
  auto node = ready.extract(name);
  return std::move(node.mapped());
}

// Magnitude builds no model: it holds a tensor in f32 with its pruned copy, and the output's mapping
// (whole while under io::kPopulateLimit, resident as written; a larger one is released tensor by
// tensor but still takes its address space). A run that cannot fit is refused before any tensor is
// read, as LlamaModel::build refuses a model (docs/design.md 11.7, "Before loading").
Status check_stream_memory(const ModelSource& source, DType dtype) {
  const MemoryBudget budget = available_memory();
  if (budget.limit.empty()) return ok_status();
  const LlamaParams& p = source.params();
  const int64_t largest = std::max({p.n_vocab, p.n_ff, p.n_head * p.head_dim()}) * p.n_embd;
  const uint64_t output = model_file_bytes(source.params(), dtype);
  const uint64_t working = 3 * static_cast<uint64_t>(largest) * sizeof(float);
  const uint64_t needed = working + (budget.limit == "ulimit -v" ? output : std::min<uint64_t>(output, io::kPopulateLimit));
  if (needed <= budget.bytes) return ok_status();
  return Error("magnitude pruning (one tensor at a time, into a " + decimal_bytes(output) + " output) needs at least " +
               decimal_bytes(needed) + ", " + decimal_bytes(budget.bytes) + " available (" + budget.limit + ")");
}

}  // namespace

Result<CalibRun> prune_model_to(const std::string& input, const std::string& output, const CalibTextOptions& options,
                                DType dtype, const std::function<void(size_t, size_t, const std::string&)>& on_tensor,
                                const std::function<Status(const CalibRun&)>& before_commit) {
  auto source = ModelSource::open(input);
  if (!source.ok()) return source.error();
  auto out = parse_model_output(output, dtype, *source);
  if (!out.ok()) return out.error();
  PruneStream stream;
  stream.source = &*source;
  stream.options = options;
  stream.before_commit = before_commit;
  stream.linears_out.assign(static_cast<size_t>(source->params().n_layer), 0);
  std::optional<LlamaModel> model;  // declared before the calibrator that points at it
  if (Status st = builds_model(options) ? ok_status() : check_stream_memory(*source, dtype); !st.ok()) {
    return st.error().with_context(input + ": ");
  }
  if (builds_model(options)) {
    auto tokenizer = load_tokenizer(*source);
    if (!tokenizer.ok() && calibrated(options)) return tokenizer.error();
    ModelOptions model_options;
    model_options.weights = options.pass_weights.value_or(pass_dtype(options.method, *source));
    auto built = LlamaModel::build(source->params(), source->tensors(), model_options);
    if (!built.ok()) return built.error().with_context(input + ": ");
    model.emplace(std::move(*built));
    std::vector<int32_t> tokens;
    int64_t n_seq = 0;
    NMKIT_TRY(calibration_tokens(model->params(), tokenizer.ok() ? &*tokenizer : nullptr, options, stream.run, tokens,
                                 n_seq));
    CalibOptions calib = calib_options(options);
    calib.on_pruned = [&stream](int64_t, std::vector<NamedTensor> pruned) -> Status {
      for (NamedTensor& t : pruned) stream.ready.emplace(std::move(t.name), std::move(t.tensor));
      return ok_status();
    };
    auto calibrator = ModelCalibrator::start(*model, std::move(tokens), n_seq, options.seq_len, std::move(calib));
    if (!calibrator.ok()) return calibrator.error();
    stream.calibrator.emplace(std::move(*calibrator));
  }
  TensorsToWrite tensors{source->params(), [&stream](const std::string& name) -> Result<Tensor> {
                            auto t = stream.load(name);
                            if (!t.ok() && !stream.failure) stream.failure = t.error();
                            return t;
                          }};
  std::function<void(size_t, size_t, const OutputTensor&)> progress;
  if (on_tensor) progress = [&on_tensor](size_t i, size_t n, const OutputTensor& t) { on_tensor(i, n, t.name); };
  if (Status st = write_model_output(*out, tensors, *source, progress); !st.ok()) {
    return stream.failure ? *stream.failure : st.error();
  }
  NMKIT_ASSERT(stream.complete);  // the writer writes every block linear
  return std::move(stream.run);
}

}  // namespace nmkit
