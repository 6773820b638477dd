// How nmkit stores weights in safetensors checkpoints, so any reader of the metadata can restore them.
//
// A weight NAME stored compressed becomes two tensors:
//   sparse24: NAME.values (weight dtype, [rows, K_pad/2]) and NAME.meta (U8, [rows, ceil(K_pad/8)])
//   nm:       NAME.values (weight dtype, [rows, groups*keep]) and NAME.mask (U8, [rows, ceil(K_pad/8)])
// and __metadata__["nmkit.NAME"] holds a JSON object describing the logical weight:
//   {"format": "sparse24"|"nm"|"dense", "pattern": "2:4", "dtype": "BF16", "shape": [rows, K]}
// A dense-masked pruned weight keeps its name and tensor and gets the same record with "dense".
// A slid weight (SlideSparse) adds "slide": {"pattern", "N", "window", "stride",
// "windows_per_group", "K", "K_pad", "K_prime", "align"}; its "shape" is then [rows, K_prime] and
// "pattern" is "2:4" (what the stored tensor complies with).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/safetensors.h"
#include "nmkit/slide_geometry.h"

namespace nmkit {

enum class WeightFormat { Dense, Sparse24, NM };
std::string_view weight_format_name(WeightFormat format);  // "dense", "sparse24", "nm"
Result<WeightFormat> parse_weight_format(std::string_view text);

struct WeightRecord {
  WeightFormat format = WeightFormat::Dense;
  Pattern pattern;
  DType dtype = DType::F32;
  Shape shape;                          // logical [rows, K] of the stored weight
  std::optional<SlideGeometry> slide;   // set for slid weights
};

std::string record_key(std::string_view name);  // "nmkit." + name
std::string encode_record(const WeightRecord& record);  // compact JSON
// The Error names the file, the tensor and the bad field.
Result<WeightRecord> decode_record(std::string_view file, std::string_view name, std::string_view json);

// Output tensors for a compressed weight (NAME.values then NAME.meta / NAME.mask); the record goes
// into the metadata under record_key(name).
std::vector<OutputTensor> packed_outputs(const std::string& name, Sparse24 packed);
std::vector<OutputTensor> packed_outputs(const std::string& name, NMPacked packed);

// One logical tensor of a checkpoint: a plain tensor, or the parts of a compressed weight.
struct StoredTensor {
  std::string name;                   // logical name (without .values/.meta/.mask)
  std::optional<WeightRecord> record; // from __metadata__, when nmkit wrote one
  std::vector<const TensorInfo*> parts;  // the file tensors it is made of
};
// Groups a file's tensors into logical tensors (file order) and checks each record against its parts.
Result<std::vector<StoredTensor>> list_stored(const SafetensorsFile& file);

// A weight loaded for computing: dense (view into the file), sparse24 or nm (copied and validated).
using LoadedWeight = std::variant<TensorView, Sparse24, NMPacked>;
Result<LoadedWeight> load_weight(const SafetensorsFile& file, const StoredTensor& stored);

}  // namespace nmkit
