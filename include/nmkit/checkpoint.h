// How nmkit stores weights in safetensors checkpoints, so any reader of the metadata can restore them.
//
// A weight NAME stored compressed becomes two tensors:
//   sparse24: NAME.values (weight dtype, [rows, K_pad/2]) and NAME.meta (U8, [rows, ceil(K_pad/8)])
//   nm:       NAME.values (weight dtype, [rows, groups*keep]) and NAME.mask (U8, [rows, ceil(K_pad/8)])
//   cutlass_sm80: NAME.values (F16 or BF16, [rows_pad, K_pad/2]) and NAME.meta (U8, [rows_pad,
//             K_pad/8]) in the layout CUTLASS's SM80 sparse GEMMs read (include/nmkit/cutlass_sm80.h
//             says how rows_pad and K_pad are padded); a 2:4 weight, loaded as sparse24
// and __metadata__["nmkit.NAME"] holds a JSON object describing the logical weight:
//   {"format": "sparse24"|"nm"|"dense"|"cutlass_sm80", "pattern": "2:4", "dtype": "BF16", "shape": [rows, K]}
// A dense-masked pruned weight keeps its name and tensor and gets the same record with "dense".
// A slid weight (SlideSparse) adds "slide": {"pattern", "N", "window", "stride",
// "windows_per_group", "K", "K_pad", "K_prime", "align"}; its "shape" is then [rows, K_prime] and
// "pattern" is "2:4" (what the stored tensor complies with).
//
// Exact schema (decode_record refuses anything else, unknown fields included, because a record
// decides how bytes are interpreted):
//   format   "dense" | "sparse24" | "nm" | "cutlass_sm80"; sparse24 and cutlass_sm80 require pattern
//            "2:4", cutlass_sm80 dtype F16 or BF16
//   pattern  "keep:group", 1 <= keep < group <= 64
//   dtype    a safetensors dtype name of the logical weight (and of NAME.values)
//   shape    [rows, K], integers in [0, 2^48] (so padded sizes cannot overflow)
//   slide    optional; all nine fields required; pattern keep:2N slidable, window 4, stride 2,
//            N = group/2, windows_per_group = N-1, K_pad = ceil(K/2N)*2N,
//            K_prime = ceil((K_pad/2N)*4(N-1) / align)*align, align a positive multiple of 4;
//            the record's pattern is then "2:4" and shape[1] == K_prime.
// Parts in the file: dense -> NAME with dtype and shape of the record; sparse24 -> NAME.values
// [rows, K_pad/2] (K_pad = ceil(K/4)*4) and NAME.meta U8 [rows, ceil(K_pad/8)]; nm -> NAME.values
// [rows, groups*keep] and NAME.mask U8 [rows, ceil(K_pad/8)] (K_pad = groups*group).
// A metadata value under "nmkit.*" is a record only when it is a JSON object (its first non-blank
// character is '{'); other "nmkit.*" values (say "nmkit.generated") are free text and ignored here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nmkit/cutlass_sm80.h"
#include "nmkit/format.h"
#include "nmkit/safetensors.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/weight_format.h"

namespace nmkit {

std::string_view weight_format_name(WeightFormat format);  // "dense", "sparse24", "nm"
Result<WeightFormat> parse_weight_format(std::string_view text);

// How a 2:4 weight's parts lie in a file: nmkit's canonical sparse24, or CUTLASS's SM80 layout
// (include/nmkit/cutlass_sm80.h). Either loads as sparse24.
enum class StoredLayout : uint8_t { Canonical, CutlassSm80 };
// A storage format as `--format` and records name it: "dense", "sparse24", "nm" (canonical), or
// "cutlass_sm80" (format Sparse24, layout CutlassSm80).
struct StoredFormat {
  WeightFormat format = WeightFormat::Dense;
  StoredLayout layout = StoredLayout::Canonical;
};
std::string_view stored_format_name(StoredFormat format);
// The Error names the bad value and the accepted ones.
Result<StoredFormat> parse_stored_format(std::string_view text);

struct WeightRecord {
  WeightFormat format = WeightFormat::Dense;
  Pattern pattern;
  DType dtype = DType::F32;
  Shape shape;                          // logical [rows, K] of the stored weight
  std::optional<SlideGeometry> slide;   // set for slid weights
  StoredLayout layout = StoredLayout::Canonical;  // CutlassSm80 only with format Sparse24
};

std::string record_key(std::string_view name);  // "nmkit." + name
// True when a "nmkit.*" metadata value is meant as a record (a JSON object), see above.
bool is_record_value(std::string_view value);
// The record of a packed weight (format, pattern, dtype, logical [rows, K]; no slide).
WeightRecord record_for(const Sparse24& packed);
WeightRecord record_for(const NMPacked& packed);
std::string encode_record(const WeightRecord& record);  // compact JSON
// The Error names the file, the tensor and the bad field.
Result<WeightRecord> decode_record(std::string_view file, std::string_view name, std::string_view json);

// Output tensors for a compressed weight (NAME.values then NAME.meta / NAME.mask); the record goes
// into the metadata under record_key(name).
std::vector<OutputTensor> packed_outputs(const std::string& name, Sparse24 packed);
std::vector<OutputTensor> packed_outputs(const std::string& name, NMPacked packed);
std::vector<OutputTensor> packed_outputs(const std::string& name, CutlassSm80 packed);

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
