// Logical tensors of a checkpoint: nmkit's records (checkpoint_record.cc) matched to the file
// tensors that hold each weight, and loading of those parts for computing.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/text.h"
#include "nmkit/checkpoint.h"

namespace nmkit {
namespace {

constexpr std::string_view kRecordPrefix = "nmkit.";
// Far above any real layer, and small enough that K_pad and groups*keep cannot overflow int64.
constexpr int64_t kMaxRecordDim = int64_t{1} << 48;

struct PartSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

std::string spec_str(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + " " + shape_str(shape); }

// The file tensors a record implies, in storage order (values before meta/mask).
Result<std::vector<PartSpec>> expected_parts(const std::string& path, const std::string& name, const WeightRecord& r) {
  if (r.shape.size() != 2 || r.shape[0] < 0 || r.shape[1] < 0 || r.shape[0] > kMaxRecordDim || r.shape[1] > kMaxRecordDim) {
    return Error(path + ": tensor " + io::quote_name(name) + ": record shape " + shape_str(r.shape) +
                 " is not [rows, K] with entries in [0, 2^48]");
  }
  const int64_t rows = r.shape[0];
  const int64_t K = r.shape[1];
  switch (r.format) {
    case WeightFormat::Dense:
      return std::vector<PartSpec>{{name, r.dtype, r.shape}};
    case WeightFormat::Sparse24: {
      if (r.layout == StoredLayout::CutlassSm80) {
        const CutlassSm80 g = cutlass_sm80_geometry(r.dtype, rows, K);
        return std::vector<PartSpec>{{name + ".values", r.dtype, {g.rows_pad(), g.K_pad() / 2}},
                                     {name + ".meta", DType::U8, {g.rows_pad(), g.meta_row_bytes()}}};
      }
      const int64_t K_pad = (K + 3) / 4 * 4;
      return std::vector<PartSpec>{{name + ".values", r.dtype, {rows, K_pad / 2}},
                                   {name + ".meta", DType::U8, {rows, (K_pad + 7) / 8}}};
    }
    case WeightFormat::NM: {
      const int64_t groups = r.pattern.groups(K);
      const int64_t K_pad = groups * r.pattern.group;
      return std::vector<PartSpec>{{name + ".values", r.dtype, {rows, groups * r.pattern.keep}},
                                   {name + ".mask", DType::U8, {rows, (K_pad + 7) / 8}}};
    }
  }
  NMKIT_ASSERT(false);
  return Error("unreachable");
}

// Finds and checks the parts of a record; the Error names file, part tensor and the bad value.
Result<std::vector<const TensorInfo*>> resolve_parts(const SafetensorsFile& file, const std::string& name,
                                                     const WeightRecord& record) {
  auto specs = expected_parts(file.path(), name, record);
  if (!specs.ok()) return specs.error();
  const std::string format(stored_format_name({record.format, record.layout}));
  std::vector<const TensorInfo*> parts;
  for (const PartSpec& spec : *specs) {
    const TensorInfo* info = file.find(spec.name);
    if (info == nullptr) {
      return Error(file.path() + ": tensor " + io::quote_name(name) + ": record says " + format +
                   " but the file has no tensor " + io::quote_name(spec.name));
    }
    if (info->dtype != spec.dtype || info->shape != spec.shape) {
      return Error(file.path() + ": tensor " + io::quote_name(spec.name) + ": " + spec_str(info->dtype, info->shape) +
                   " does not match the " + format + " record of " + io::quote_name(name) + " (" +
                   spec_str(record.dtype, record.shape) + " " + record.pattern.str() + " needs " +
                   spec_str(spec.dtype, spec.shape) + ")");
    }
    parts.push_back(info);
  }
  return parts;
}

// load_weight may be handed a StoredTensor built by hand: its parts must be what its record implies.
Status check_stored(const SafetensorsFile& file, const StoredTensor& stored) {
  if (!stored.record) {
    if (stored.parts.size() != 1 || stored.parts[0] == nullptr) {
      return Error(file.path() + ": tensor " + io::quote_name(stored.name) + ": a plain tensor has exactly one part, not " +
                   std::to_string(stored.parts.size()));
    }
    return ok_status();
  }
  auto parts = resolve_parts(file, stored.name, *stored.record);
  if (!parts.ok()) return parts.error();
  if (*parts != stored.parts) {
    return Error(file.path() + ": tensor " + io::quote_name(stored.name) + ": its parts are not the " +
                 std::string(weight_format_name(stored.record->format)) + " parts its record names");
  }
  return ok_status();
}

}  // namespace

std::vector<OutputTensor> packed_outputs(const std::string& name, Sparse24 packed) {
  std::vector<OutputTensor> out;
  out.push_back(OutputTensor::owning(name + ".values", std::move(packed.values)));
  out.push_back(OutputTensor::owning(name + ".meta", std::move(packed.meta)));
  return out;
}

std::vector<OutputTensor> packed_outputs(const std::string& name, CutlassSm80 packed) {
  std::vector<OutputTensor> out;
  out.push_back(OutputTensor::owning(name + ".values", std::move(packed.values)));
  out.push_back(OutputTensor::owning(name + ".meta", std::move(packed.meta)));
  return out;
}

std::vector<OutputTensor> packed_outputs(const std::string& name, NMPacked packed) {
  std::vector<OutputTensor> out;
  out.push_back(OutputTensor::owning(name + ".values", std::move(packed.values)));
  out.push_back(OutputTensor::owning(name + ".mask", std::move(packed.mask)));
  return out;
}

Result<std::vector<StoredTensor>> list_stored(const SafetensorsFile& file) {
  std::vector<StoredTensor> recorded;
  std::map<const TensorInfo*, size_t> owner;  // part -> index in `recorded`
  for (const auto& [key, value] : file.metadata()) {
    if (key.compare(0, kRecordPrefix.size(), kRecordPrefix) != 0 || !is_record_value(value)) continue;
    const std::string name = key.substr(kRecordPrefix.size());
    auto record = decode_record(file.path(), name, value);
    if (!record.ok()) return record.error();
    auto parts = resolve_parts(file, name, *record);
    if (!parts.ok()) return parts.error();
    if (record->format != WeightFormat::Dense && file.find(name) != nullptr) {
      return Error(file.path() + ": tensor " + io::quote_name(name) + ": stored both plain and as " +
                   std::string(weight_format_name(record->format)) + " parts");
    }
    for (const TensorInfo* part : *parts) {
      const auto [it, inserted] = owner.emplace(part, recorded.size());
      if (!inserted) {
        return Error(file.path() + ": tensor " + io::quote_name(part->name) + ": claimed by the records of both " +
                     io::quote_name(recorded[it->second].name) + " and " + io::quote_name(name));
      }
    }
    recorded.push_back(StoredTensor{name, std::move(record.value()), std::move(parts.value())});
  }

  // File order: a recorded weight appears where its first part is.
  std::vector<StoredTensor> out;
  out.reserve(file.tensors().size());
  std::vector<bool> emitted(recorded.size(), false);
  for (const TensorInfo& info : file.tensors()) {
    const auto it = owner.find(&info);
    if (it == owner.end()) {
      out.push_back(StoredTensor{info.name, std::nullopt, {&info}});
    } else if (!emitted[it->second]) {
      emitted[it->second] = true;
      out.push_back(std::move(recorded[it->second]));
    }
  }
  return out;
}

Result<LoadedWeight> load_weight(const SafetensorsFile& file, const StoredTensor& stored) {
  NMKIT_TRY(check_stored(file, stored));
  if (!stored.record || stored.record->format == WeightFormat::Dense) {
    return LoadedWeight(file.view(*stored.parts[0]));
  }
  const WeightRecord& record = *stored.record;
  const std::string context = file.path() + ": ";
  if (record.layout == StoredLayout::CutlassSm80) {
    CutlassSm80 layout = cutlass_sm80_geometry(record.dtype, record.shape[0], record.shape[1]);
    layout.values = Tensor::copy_of(file.view(*stored.parts[0]));
    layout.meta = Tensor::copy_of(file.view(*stored.parts[1]));
    auto packed = from_cutlass_sm80(layout, stored.name);  // validates
    if (!packed.ok()) return packed.error().with_context(context);
    return LoadedWeight(std::move(*packed));
  }
  if (record.format == WeightFormat::Sparse24) {
    Sparse24 packed;
    packed.K = record.shape[1];
    packed.values = Tensor::copy_of(file.view(*stored.parts[0]));
    packed.meta = Tensor::copy_of(file.view(*stored.parts[1]));
    const Status valid = validate(packed, stored.name);
    if (!valid.ok()) return valid.error().with_context(context);
    return LoadedWeight(std::move(packed));
  }
  NMPacked packed;
  packed.pattern = record.pattern;
  packed.K = record.shape[1];
  packed.values = Tensor::copy_of(file.view(*stored.parts[0]));
  packed.mask = Tensor::copy_of(file.view(*stored.parts[1]));
  const Status valid = validate(packed, stored.name);
  if (!valid.ok()) return valid.error().with_context(context);
  return LoadedWeight(std::move(packed));
}

}  // namespace nmkit
