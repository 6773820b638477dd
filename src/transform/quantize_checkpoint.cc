// Quantizing an activation file (include/nmkit/quantize_checkpoint.h): the per-tensor transform
// handed to the checkpoint transform driver.
#include "nmkit/quantize_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

#include "nmkit/checkpoint_transform.h"

namespace nmkit {
namespace {

// One tensor: quantized by the fill of NAME.codes, its scales kept for the fill of NAME.scales.
struct QuantItem {
  TensorView x;
  std::optional<SlideGeometry> geometry;
  QuantizedTensor result;
  Tensor scales;
};

struct QuantizeState {
  const QuantizeCheckpointJob& job;
  std::vector<std::unique_ptr<QuantItem>> items;
};

Result<TensorPlan> plan_quantize(QuantizeState& state, const SafetensorsFile& file, const StoredTensor& st) {
  const QuantizeCheckpointJob& job = state.job;
  const TensorInfo& info = *st.parts[0];  // TensorListing::FileTensors: one part each
  if (info.shape.size() != 2 || !is_prunable(info.dtype) || info.shape[1] < 1) return TensorPlan::drop();
  auto item = std::make_unique<QuantItem>();
  item->x = file.view(info);
  item->result = QuantizedTensor{info.name, info.shape, info.shape[1], 0, 0};
  if (job.lift) {
    auto geometry = SlideGeometry::make(*job.lift, info.shape[1], job.align);
    if (!geometry.ok()) return geometry.error().with_context(job.input + ": tensor " + quote_name(info.name) + ": ");
    item->geometry = *geometry;
    item->result.cols = geometry->K_prime();
  }
  QuantItem* raw = item.get();
  state.items.push_back(std::move(item));
  const DType code_dtype = job.type == QuantType::Int8 ? DType::I8 : DType::U8;  // e4m3 bytes as U8
  std::vector<OutputTensor> outputs;
  outputs.push_back(OutputTensor{info.name + ".codes", code_dtype, {info.shape[0], raw->result.cols},
                                 [raw, &job](std::byte* dst) -> Status {
                                   raw->scales = Tensor::empty(DType::F32, {raw->x.rows()});
                                   Status status = quantize_tokens_into(
                                       raw->x, job.type, raw->geometry ? &*raw->geometry : nullptr, dst,
                                       raw->result.cols, raw->scales.as<float>(), raw->result.name);
                                   if (!status.ok()) return status.error().with_context(job.input + ": ");
                                   return ok_status();
                                 }});
  outputs.push_back(OutputTensor{info.name + ".scales", DType::F32, {info.shape[0]}, [raw](std::byte* dst) -> Status {
                                   std::memcpy(dst, raw->scales.data(), raw->scales.nbytes());
                                   const float* s = raw->scales.as<float>();
                                   const int64_t n = raw->scales.numel();
                                   if (n > 0) {
                                     raw->result.scale_min = *std::min_element(s, s + n);
                                     raw->result.scale_max = *std::max_element(s, s + n);
                                   }
                                   raw->scales = Tensor();
                                   return ok_status();
                                 }});
  return TensorPlan::replace(std::move(outputs));
}

// The "nmkit-quantize" metadata entry: the rule the codes follow. Not under "nmkit.": a JSON object
// there is a weight record (include/nmkit/checkpoint.h), and readers would refuse this one as a
// malformed record of a weight named "quantize".
std::string quantize_record(const QuantizeCheckpointJob& job) {
  nlohmann::json record{{"dtype", quant_type_name(job.type)},
                        {"codes_dtype", job.type == QuantType::Int8 ? "I8" : "U8 (e4m3fn bytes)"},
                        {"rule", job.type == QuantType::Int8
                                     ? "q = clamp(rne(x * (127/absmax)), -127, 127), scale = absmax/127"
                                     : "q = e4m3_rne_satfinite(x * (448/absmax)), scale = absmax/448"}};
  if (job.lift) {
    record["lift"] = job.lift->str();
    record["align"] = job.align;
  }
  return record.dump();
}

}  // namespace

Result<QuantizeOutcome> quantize_checkpoint(const QuantizeCheckpointJob& job) {
  if (job.lift) {
    if (auto probe = SlideGeometry::make(*job.lift, 1, job.align); !probe.ok()) return probe.error();
  }
  QuantizeState state{job, {}};
  CheckpointTransformOptions options;
  options.input = job.input;
  options.output = job.output;
  options.listing = TensorListing::FileTensors;
  options.keep_metadata = false;
  options.metadata = {{"nmkit-quantize", quantize_record(job)}};
  options.on_tensor = job.on_tensor;
  options.on_planned = [&job](const CheckpointTransformOutcome& planned) -> Status {
    if (planned.replaced == 0) return Error(job.input + ": no 2-D F32/F16/BF16 tensor to quantize");
    return ok_status();
  };
  auto written = transform_checkpoint(options, [&state](const SafetensorsFile& file, const StoredTensor& st) {
    return plan_quantize(state, file, st);
  });
  if (!written.ok()) return written.error();
  QuantizeOutcome outcome;
  for (const auto& item : state.items) outcome.tensors.push_back(item->result);
  outcome.skipped_tensors = written->dropped_parts;
  return outcome;
}

}  // namespace nmkit
