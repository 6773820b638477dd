// Sliding a checkpoint (include/nmkit/slide_checkpoint.h): the per-tensor transform handed to the
// checkpoint transform driver.
#include "nmkit/slide_checkpoint.h"

#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "nmkit/format.h"
#include "nmkit/slide.h"

namespace nmkit {
namespace {

// One weight to slide; its parts are filled lazily by the writer (one weight in memory at a time).
struct SlideItem {
  const StoredTensor* stored = nullptr;
  SlidTensor result;
  std::optional<Tensor> meta;  // the metadata part between the fills of the two parts
};

struct SlideState {
  const SlideCheckpointJob& job;
  std::vector<std::unique_ptr<SlideItem>> items;
};

// The weight as a dense-masked tensor (compressed inputs are decompressed).
Result<Tensor> load_dense(const SafetensorsFile& file, const StoredTensor& stored) {
  auto loaded = load_weight(file, stored);
  if (!loaded.ok()) return loaded.error();
  if (const auto* view = std::get_if<TensorView>(&*loaded)) return Tensor::copy_of(*view);
  if (const auto* s24 = std::get_if<Sparse24>(&*loaded)) return decompress(*s24);
  return decompress(std::get<NMPacked>(*loaded));
}

Result<Tensor> slide_dense(const SlideCheckpointJob& job, const SafetensorsFile& file, const SlideItem& item) {
  auto dense = load_dense(file, *item.stored);
  if (!dense.ok()) return dense.error().in_file(job.input);
  auto slid = slide(dense->view(), item.result.geometry, item.result.name);
  if (!slid.ok()) {
    Error error = slid.error().in_file(job.input);
    return job.noncompliant_hint.empty() ? error : Error(error.message() + "; " + job.noncompliant_hint);
  }
  return std::move(*slid);
}

Result<TensorPlan> plan_slide(SlideState& state, const SafetensorsFile& file, const StoredTensor& st) {
  const SlideCheckpointJob& job = state.job;
  const TensorInfo* info = st.parts.size() == 1 ? st.parts[0] : nullptr;
  DType dtype = info != nullptr ? info->dtype : DType::U8;
  Shape shape = info != nullptr ? info->shape : Shape{};
  if (st.record) {
    dtype = st.record->dtype;
    shape = st.record->shape;
  }
  const bool already_slid = st.record && st.record->slide.has_value();
  if (already_slid || (!st.record && info == nullptr) || shape.size() != 2 || !is_prunable(dtype) || shape[0] <= 0 ||
      shape[1] <= 0) {
    return TensorPlan::copy();
  }
  auto geometry = SlideGeometry::make(job.pattern, shape[1], job.align);
  if (!geometry.ok()) return geometry.error().with_context(job.input + ": tensor " + quote_name(st.name) + ": ");
  auto item = std::make_unique<SlideItem>();
  item->stored = &st;
  item->result = SlidTensor{st.name, shape[0], *geometry};
  SlideItem* raw = item.get();
  state.items.push_back(std::move(item));

  const bool sm80 = job.layout == StoredLayout::CutlassSm80;
  if (sm80 && dtype != DType::F16 && dtype != DType::BF16) {
    return Error(ErrorCode::Unsupported, job.input + ": tensor " + quote_name(st.name) + ": format cutlass_sm80 " +
                                             "holds F16 or BF16 weights, this one is " + std::string(dtype_name(dtype)));
  }
  WeightRecord record;
  record.format = job.format;
  record.layout = job.layout;
  record.pattern = Pattern{2, 4};  // what the stored tensor complies with
  record.dtype = dtype;
  record.shape = {shape[0], geometry->K_prime()};
  record.slide = *geometry;

  std::vector<OutputTensor> outputs;
  if (job.format == WeightFormat::Dense) {
    outputs.push_back(OutputTensor{st.name, dtype, record.shape, [&job, &file, raw](std::byte* dst) -> Status {
                                     auto slid = slide_dense(job, file, *raw);
                                     if (!slid.ok()) return slid.error();
                                     std::memcpy(dst, slid->data(), slid->nbytes());
                                     return ok_status();
                                   }});
    return TensorPlan::replace(std::move(outputs), record);
  }
  const int64_t K_prime = geometry->K_prime();  // a multiple of 4: no sparse24 padding
  Shape values_shape{shape[0], K_prime / 2}, meta_shape{shape[0], (K_prime + 7) / 8};
  if (sm80) {
    const CutlassSm80 g = cutlass_sm80_geometry(dtype, shape[0], K_prime);
    values_shape = {g.rows_pad(), g.K_pad() / 2};
    meta_shape = {g.rows_pad(), g.meta_row_bytes()};
  }
  outputs.push_back(OutputTensor{st.name + ".values", dtype, values_shape,
                                 [&job, &file, raw, sm80](std::byte* dst) -> Status {
                                   auto slid = slide_dense(job, file, *raw);
                                   if (!slid.ok()) return slid.error();
                                   auto packed = compress_sparse24(slid->view(), raw->result.name);
                                   if (!packed.ok()) return packed.error().in_file(job.input);
                                   if (!sm80) {
                                     std::memcpy(dst, packed->values.data(), packed->values.nbytes());
                                     raw->meta = std::move(packed->meta);
                                     return ok_status();
                                   }
                                   auto layout = to_cutlass_sm80(*packed, raw->result.name);
                                   if (!layout.ok()) return layout.error().in_file(job.input);
                                   std::memcpy(dst, layout->values.data(), layout->values.nbytes());
                                   raw->meta = std::move(layout->meta);
                                   return ok_status();
                                 }});
  outputs.push_back(OutputTensor{st.name + ".meta", DType::U8, meta_shape, [raw](std::byte* dst) -> Status {
                                   NMKIT_ASSERT(raw->meta.has_value());  // .values is filled first
                                   std::memcpy(dst, raw->meta->data(), raw->meta->nbytes());
                                   raw->meta.reset();
                                   return ok_status();
                                 }});
  return TensorPlan::replace(std::move(outputs), record);
}

}  // namespace

Result<SlideOutcome> slide_checkpoint(const SlideCheckpointJob& job) {
  if (auto probe = SlideGeometry::make(job.pattern, 1, job.align); !probe.ok()) return probe.error();
  if (job.format != WeightFormat::Dense && job.format != WeightFormat::Sparse24) {
    return Error(ErrorCode::InvalidArgument, "format " + std::string(weight_format_name(job.format)) +
                                                 ": a slid weight is 2:4; use dense, sparse24 or cutlass_sm80");
  }
  SlideState state{job, {}};
  CheckpointTransformOptions options;
  options.input = job.input;
  options.output = job.output;
  options.selected = job.selected;
  options.on_tensor = job.on_tensor;
  auto written = transform_checkpoint(
      options, [&state](const SafetensorsFile& file, const StoredTensor& st) { return plan_slide(state, file, st); });
  if (!written.ok()) return written.error();
  SlideOutcome outcome;
  for (const auto& item : state.items) outcome.tensors.push_back(item->result);
  outcome.copied_tensors = written->copied_parts;
  return outcome;
}

}  // namespace nmkit
