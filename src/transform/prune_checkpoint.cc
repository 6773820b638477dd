// Pruning a checkpoint (include/nmkit/prune_checkpoint.h): the per-tensor transform handed to the
// checkpoint transform driver.
#include "nmkit/prune_checkpoint.h"

#include <memory>
#include <optional>
#include <utility>

#include "nmkit/format.h"
#include "nmkit/safetensors.h"

namespace nmkit {
namespace {

// Lazily computed parts of one compressed weight: the first part's fill prunes and compresses, each
// part's fill copies its bytes, and the parts are released once both are written (one weight in
// flight at a time).
struct PackState {
  std::vector<OutputTensor> parts;
  int filled = 0;
};

struct Item {
  std::string name;
  TensorView weight;
  TensorView gradient;
  TensorView act_norms;
  ScoreInputs inputs;
  PrunedTensor result;
  PackState pack;
};

// Shapes of the stored parts, known before any weight is read so the writer can lay out the file.
struct PartShapes {
  Shape values;
  Shape side;  // meta or mask, U8
};

PartShapes part_shapes(const PruneCheckpointJob& job, DType dtype, int64_t rows, int64_t K) {
  const WeightFormat format = job.format;
  const Pattern pattern = job.pattern;
  if (format == WeightFormat::Sparse24 && job.layout == StoredLayout::CutlassSm80) {
    const CutlassSm80 g = cutlass_sm80_geometry(dtype, rows, K);
    return {{g.rows_pad(), g.K_pad() / 2}, {g.rows_pad(), g.meta_row_bytes()}};
  }
  if (format == WeightFormat::Sparse24) {
    Sparse24 geometry;
    geometry.K = K;
    return {{rows, geometry.K_pad() / 2}, {rows, geometry.meta_stride()}};
  }
  NMPacked geometry;
  geometry.pattern = pattern;
  geometry.K = K;
  return {{rows, geometry.groups() * pattern.keep}, {rows, geometry.mask_stride()}};
}

// What the transform shares between the plans and the fills of one job.
struct PruneState {
  const PruneCheckpointJob& job;
  std::optional<SafetensorsFile> grad, norms;
  std::vector<std::unique_ptr<Item>> items;
  // The dense-masked weight before compression, reused from weight to weight: a fresh allocation
  // per weight cost a page fault per 4 KiB (measured: about 7% of `prune --format nm` on 4096x4096
  // f32 weights). The writer fills tensors one after another (safetensors.h), so one buffer serves all.
  std::vector<std::byte> scratch;
};

// A bad value found while pruning belongs to the file it came from: the library says which operand
// (weight, gradient, act_norms) it found it in.
const std::string& file_of_error(const PruneCheckpointJob& job, const Error& error) {
  if (error.operand() == "gradient" && !job.grad_path.empty()) return job.grad_path;
  if (error.operand() == "act_norms" && !job.act_norms_path.empty()) return job.act_norms_path;
  return job.input;
}

Status prune_item(const PruneCheckpointJob& job, Item& item, std::byte* dst) {
  auto sums = prune_into(item.weight, job.pattern, job.method, item.inputs, dst, item.name);
  if (!sums.ok()) return sums.error().in_file(file_of_error(job, sums.error()));
  item.result.sums = *sums;
  return ok_status();
}

// Prunes into the scratch buffer, compresses, and checks that the parts are what was declared.
Status pack_item(PruneState& state, Item& item, const PartShapes& shapes) {
  const PruneCheckpointJob& job = state.job;
  if (state.scratch.size() < item.weight.nbytes()) state.scratch.resize(item.weight.nbytes());
  NMKIT_TRY(prune_item(job, item, state.scratch.data()));
  const TensorView dense{item.weight.dtype, item.weight.shape, state.scratch.data()};
  size_t memory_bytes = 0;
  if (job.format == WeightFormat::Sparse24) {
    auto packed = compress_sparse24(dense, item.name);
    if (!packed.ok()) return packed.error().in_file(job.input);
    if (job.layout == StoredLayout::CutlassSm80) {
      auto layout = to_cutlass_sm80(*packed, item.name);
      if (!layout.ok()) return layout.error().in_file(job.input);
      memory_bytes = layout->memory_bytes();
      item.pack.parts = packed_outputs(item.name, std::move(*layout));
    } else {
      memory_bytes = packed->memory_bytes();
      item.pack.parts = packed_outputs(item.name, std::move(*packed));
    }
  } else {
    auto packed = compress_nm(dense, job.pattern, item.name);
    if (!packed.ok()) return packed.error().in_file(job.input);
    memory_bytes = packed->memory_bytes();
    item.pack.parts = packed_outputs(item.name, std::move(*packed));
  }
  const auto& parts = item.pack.parts;
  NMKIT_ASSERT(parts.size() == 2);
  NMKIT_ASSERT(parts[0].shape == shapes.values && parts[0].dtype == item.weight.dtype);
  NMKIT_ASSERT(parts[1].shape == shapes.side && parts[1].dtype == DType::U8);
  NMKIT_ASSERT(memory_bytes == item.result.stored_bytes);
  return ok_status();
}

std::string dtype_text(DType dtype) { return std::string(dtype_name(dtype)); }

// The gradient or norm tensor of a weight: present, of the right shape and a float dtype.
Result<TensorView> score_input(const SafetensorsFile& file, const PruneCheckpointJob& job, const Item& item,
                               bool gradient) {
  const std::string& path = gradient ? job.grad_path : job.act_norms_path;
  const std::string where = path + ": tensor " + quote_name(item.name) + ": ";
  const TensorInfo* info = file.find(item.name);
  if (info == nullptr) {
    return Error(where + "missing (the " + (gradient ? "gradient" : "input-feature norms") + " of weight " +
                 quote_name(item.name) + " of " + job.input + ")");
  }
  const Shape expected = gradient ? item.weight.shape : Shape{item.weight.cols()};
  if (info->shape != expected) {
    return Error(where + (gradient ? "gradient shape " + shape_str(info->shape) + " does not match the weight's shape "
                                   : "norm shape " + shape_str(info->shape) + " does not match the weight's K, expected ") +
                 shape_str(expected));
  }
  if (!is_prunable(info->dtype)) {
    return Error(where + (gradient ? "gradient" : "norm") + " dtype " + dtype_text(info->dtype) +
                 " is not F32, F16 or BF16");
  }
  return file.view(*info);
}

Status check_method_inputs(const PruneCheckpointJob& job) {
  const bool gradient = job.method == PruneMethod::Gradient;
  const bool wanda = job.method == PruneMethod::Wanda;
  if (gradient != !job.grad_path.empty()) {
    return Error(ErrorCode::InvalidArgument, "a gradient file is needed by, and only by, method gradient");
  }
  if (wanda != !job.act_norms_path.empty()) {
    return Error(ErrorCode::InvalidArgument, "an activation-norms file is needed by, and only by, method wanda");
  }
  return ok_status();
}

// The plan of one tensor: weights already stored compressed, slid weights (pruning the [rows, K']
// form would drop the slide record and leave a weight that no longer matches its activations, issue
// 13 W1) and anything that is not a 2-D float tensor pass through byte for byte.
Result<TensorPlan> plan_prune(PruneState& state, const SafetensorsFile& input, const StoredTensor& st) {
  const PruneCheckpointJob& job = state.job;
  const bool compressed = st.record.has_value() && st.record->format != WeightFormat::Dense;
  const bool slid = st.record.has_value() && st.record->slide.has_value();
  const TensorInfo* info = st.parts.size() == 1 ? st.parts[0] : nullptr;
  if (compressed || slid || info == nullptr || info->shape.size() != 2 || !is_prunable(info->dtype) ||
      shape_numel(info->shape) == 0) {
    return TensorPlan::copy();
  }
  auto item = std::make_unique<Item>();
  item->name = info->name;
  item->weight = input.view(*info);
  item->result.name = info->name;
  item->result.dtype = info->dtype;
  item->result.shape = info->shape;
  item->result.dense_bytes = item->weight.nbytes();
  if (state.grad) {
    auto view = score_input(*state.grad, job, *item, true);
    if (!view.ok()) return view.error();
    item->gradient = *view;
    item->inputs.gradient = &item->gradient;
  }
  if (state.norms) {
    auto view = score_input(*state.norms, job, *item, false);
    if (!view.ok()) return view.error();
    item->act_norms = *view;
    item->inputs.act_norms = &item->act_norms;
  }

  if (job.layout == StoredLayout::CutlassSm80 && info->dtype != DType::F16 && info->dtype != DType::BF16) {
    return Error(ErrorCode::Unsupported, job.input + ": tensor " + quote_name(info->name) + ": format cutlass_sm80 " +
                                             "holds F16 or BF16 weights, this one is " + dtype_text(info->dtype));
  }
  WeightRecord record;
  record.format = job.format;
  record.layout = job.layout;
  // sparse24 is a 2:4 format (checkpoint records say what the stored tensor complies with), so a
  // 1:4-pruned weight stored as sparse24 is recorded as 2:4; the report keeps the pruning pattern.
  record.pattern = job.format == WeightFormat::Sparse24 ? Pattern{2, 4} : job.pattern;
  record.dtype = info->dtype;
  record.shape = info->shape;

  Item* raw = item.get();
  state.items.push_back(std::move(item));
  std::vector<OutputTensor> outputs;
  if (job.format == WeightFormat::Dense) {
    raw->result.stored_bytes = raw->result.dense_bytes;
    outputs.push_back(OutputTensor{raw->name, info->dtype, info->shape,
                                   [&job, raw](std::byte* dst) { return prune_item(job, *raw, dst); }});
    return TensorPlan::replace(std::move(outputs), record);
  }
  const PartShapes shapes = part_shapes(job, info->dtype, info->shape[0], info->shape[1]);
  raw->result.stored_bytes = static_cast<size_t>(shape_numel(shapes.values)) * dtype_size(info->dtype) +
                             static_cast<size_t>(shape_numel(shapes.side));
  const std::string side = job.format == WeightFormat::Sparse24 ? ".meta" : ".mask";
  const auto fill_part = [&state, raw, shapes](size_t index, std::byte* dst) -> Status {
    if (raw->pack.parts.empty()) NMKIT_TRY(pack_item(state, *raw, shapes));
    NMKIT_TRY(raw->pack.parts[index].fill(dst));
    if (++raw->pack.filled == 2) raw->pack.parts.clear();
    return ok_status();
  };
  outputs.push_back(OutputTensor{raw->name + ".values", info->dtype, shapes.values,
                                 [fill_part](std::byte* dst) { return fill_part(0, dst); }});
  outputs.push_back(OutputTensor{raw->name + side, DType::U8, shapes.side,
                                 [fill_part](std::byte* dst) { return fill_part(1, dst); }});
  return TensorPlan::replace(std::move(outputs), record);
}

}  // namespace

Status check_format_pattern(WeightFormat format, Pattern pattern) {
  if (format == WeightFormat::Sparse24 && !(pattern.group == 4 && pattern.keep <= 2)) {
    return Error(ErrorCode::InvalidArgument, "sparse24: pattern " + pattern.str() +
                                                 " does not give 2:4-compliant weights (use 2:4 or 1:4, or nm)");
  }
  return ok_status();
}

Result<PreparedPrune> prepare_prune_checkpoint(const PruneCheckpointJob& job) {
  NMKIT_TRY(check_format_pattern(job.format, job.pattern));
  NMKIT_ASSERT(job.layout == StoredLayout::Canonical || job.format == WeightFormat::Sparse24);
  NMKIT_TRY(check_method_inputs(job));
  PruneState state{job, std::nullopt, std::nullopt, {}, {}};
  if (!job.grad_path.empty()) {
    auto file = SafetensorsFile::open(job.grad_path);
    if (!file.ok()) return file.error().in_file(job.grad_path);
    state.grad.emplace(std::move(*file));
  }
  if (!job.act_norms_path.empty()) {
    auto file = SafetensorsFile::open(job.act_norms_path);
    if (!file.ok()) return file.error().in_file(job.act_norms_path);
    state.norms.emplace(std::move(*file));
  }
  CheckpointTransformOptions options;
  options.input = job.input;
  options.output = job.output;
  options.selected = job.selected;
  options.on_tensor = job.on_tensor;
  auto prepared = prepare_checkpoint_transform(
      options, [&state](const SafetensorsFile& input, const StoredTensor& st) { return plan_prune(state, input, st); });
  if (!prepared.ok()) return prepared.error();

  PruneOutcome outcome;
  for (const auto& item : state.items) {
    outcome.total += item->result.sums;
    outcome.dense_bytes += item->result.dense_bytes;
    outcome.stored_bytes += item->result.stored_bytes;
    outcome.tensors.push_back(item->result);
  }
  const CheckpointTransformOutcome& written = prepared->outcome;
  outcome.copied_tensors = written.copied_parts;
  outcome.input_bytes = written.input_bytes;
  outcome.seconds = written.seconds;
  outcome.fill_seconds = written.fill_seconds;
  return PreparedPrune{std::move(outcome), std::move(prepared->output)};
}

Result<PruneOutcome> prune_checkpoint(const PruneCheckpointJob& job) {
  auto prepared = prepare_prune_checkpoint(job);
  if (!prepared.ok()) return prepared.error();
  NMKIT_TRY(prepared->output.commit());
  return std::move(prepared->outcome);
}

}  // namespace nmkit
