// The checkpoint transform driver (include/nmkit/checkpoint_transform.h): list, plan every tensor,
// then write through prepare_safetensors with lazily filled outputs.
#include "nmkit/checkpoint_transform.h"

#include <chrono>
#include <utility>

#include "core/stopwatch.h"

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;

// Every file tensor on its own, no record (TensorListing::FileTensors).
std::vector<StoredTensor> list_file_tensors(const SafetensorsFile& file) {
  std::vector<StoredTensor> out;
  out.reserve(file.tensors().size());
  for (const TensorInfo& info : file.tensors()) out.push_back(StoredTensor{info.name, std::nullopt, {&info}});
  return out;
}

size_t output_bytes(const OutputTensor& t) {
  return static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
}

// Copies every part. A compressed weight is validated as inspect and linear would load it (issue 13,
// W5), in its first part's fill so that only one weight is in memory at a time.
void append_copy(const SafetensorsFile& file, const StoredTensor& st, std::vector<OutputTensor>& outputs) {
  const size_t first = outputs.size();
  for (const TensorInfo* part : st.parts) outputs.push_back(OutputTensor::copy_of(part->name, file.view(*part)));
  const bool compressed = st.record.has_value() && st.record->format != WeightFormat::Dense;
  if (compressed && outputs.size() > first) {
    outputs[first].fill = [&file, &st, copy = std::move(outputs[first].fill)](std::byte* dst) -> Status {
      auto loaded = load_weight(file, st);
      if (!loaded.ok()) return loaded.error().in_file(file.path());
      return copy(dst);
    };
  }
}

}  // namespace

Result<PreparedCheckpoint> prepare_checkpoint_transform(const CheckpointTransformOptions& options,
                                                        const TensorTransform& transform) {
  const auto start = Clock::now();
  if (options.unselected == TensorAction::Replace) {
    return Error(ErrorCode::InvalidArgument, "unselected tensors can be copied or dropped, not replaced");
  }
  auto input = SafetensorsFile::open(options.input);
  if (!input.ok()) return input.error().in_file(options.input);
  const SafetensorsFile& file = *input;
  std::vector<StoredTensor> stored;
  if (options.listing == TensorListing::Logical) {
    auto listed = list_stored(file);
    if (!listed.ok()) return listed.error().in_file(options.input);
    stored = std::move(*listed);
  } else {
    stored = list_file_tensors(file);
  }

  CheckpointTransformOutcome outcome;
  for (const TensorInfo& info : file.tensors()) outcome.input_bytes += info.end - info.begin;
  Metadata metadata = options.keep_metadata ? file.metadata() : Metadata{};
  for (const auto& [key, value] : options.metadata) metadata[key] = value;

  std::vector<OutputTensor> outputs;
  for (const StoredTensor& st : stored) {
    TransformedTensorRecord record;
    record.name = st.name;
    record.parts_in = st.parts.size();
    for (const TensorInfo* part : st.parts) record.bytes_in += part->end - part->begin;

    TensorPlan plan;
    if (options.selected && !options.selected(st.name)) {
      plan.action = options.unselected;
    } else {
      auto planned = transform(file, st);
      if (!planned.ok()) return planned.error();
      plan = std::move(*planned);
    }
    record.action = plan.action;
    const size_t first = outputs.size();
    switch (plan.action) {
      case TensorAction::Copy:
        append_copy(file, st, outputs);
        outcome.copied_parts += st.parts.size();
        break;
      case TensorAction::Drop:
        if (options.keep_metadata) metadata.erase(record_key(st.name));
        outcome.dropped_parts += st.parts.size();
        break;
      case TensorAction::Replace:
        if (plan.record) {
          metadata[record_key(st.name)] = encode_record(*plan.record);
        } else if (options.keep_metadata) {
          metadata.erase(record_key(st.name));
        }
        for (OutputTensor& out : plan.outputs) outputs.push_back(std::move(out));
        ++outcome.replaced;
        break;
    }
    record.parts_out = outputs.size() - first;
    for (size_t i = first; i < outputs.size(); ++i) record.bytes_out += output_bytes(outputs[i]);
    outcome.tensors.push_back(std::move(record));
  }

  if (options.on_planned) NMKIT_TRY(options.on_planned(outcome));

  // Time inside the fills (reading the input, transforming, copying) against everything else
  // (opening, allocating and syncing the output), for the commands' summary lines.
  double fill_seconds = 0;
  for (auto& out : outputs) {
    out.fill = [inner = std::move(out.fill), &fill_seconds](std::byte* dst) {
      const auto begin = Clock::now();
      Status status = inner(dst);
      fill_seconds += seconds_since(begin);
      return status;
    };
  }
  WriteOptions write_options;
  if (options.on_tensor) {
    write_options.on_tensor = [&options](size_t i, size_t n, const OutputTensor& t) { options.on_tensor(i, n, t.name); };
  }
  auto pending = prepare_safetensors(options.output, outputs, metadata, write_options);
  if (!pending.ok()) return pending.error();
  outcome.seconds = seconds_since(start);
  outcome.fill_seconds = fill_seconds;
  return PreparedCheckpoint{std::move(outcome), std::move(*pending)};
}

Result<CheckpointTransformOutcome> transform_checkpoint(const CheckpointTransformOptions& options,
                                                        const TensorTransform& transform) {
  auto prepared = prepare_checkpoint_transform(options, transform);
  if (!prepared.ok()) return prepared.error();
  NMKIT_TRY(prepared->output.commit());
  return std::move(prepared->outcome);
}

}  // namespace nmkit
