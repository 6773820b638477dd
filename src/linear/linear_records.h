// A SparseLinear's packed records as a packed model file holds them (docs/design.md 11.9): a header
// of int32 fields that fixes the layout (cpu::record_layout gives every size from it) and up to five
// byte arrays, each stored with every byte a kernel may read (AlignedBytes::stored_bytes), so that a
// layer runs on them in place, from the file's mapping, with nothing copied or converted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/linear.h"
#include "nmkit/status.h"

namespace nmkit::linear {

// The arrays, in file order: the values (or dense rows), the sparse24 meta words or nm masks, INT8
// per-row scales and code sums, the bias.
inline constexpr int kRecordArrays = 5;
std::string_view record_array_name(int array);  // "values", "meta", "scale", "sum", "bias"
// The header's length, in int32 fields.
inline constexpr int kRecordHeaderFields = 12;

// What a writer stores for a layer: the header, and per array its stored length (0: the form has
// none) and a function writing exactly that many bytes.
struct StoredArray {
  size_t bytes = 0;
  std::function<void(std::byte* dst)> write;
};
struct RecordsToStore {
  std::vector<int32_t> header;
  std::array<StoredArray, kRecordArrays> arrays;
};
// The records of `layer` (the writes read its memory: valid while it lives). An Error for a layer
// whose sizes do not fit the header's int32 fields.
Result<RecordsToStore> records_of(const SparseLinear& layer);

// Records as a reader finds them: the header and the arrays' bytes (empty where absent).
struct StoredRecords {
  std::span<const int32_t> header;
  std::array<std::span<const std::byte>, kRecordArrays> arrays;
};
// A layer running on `records` where they lie (`owner` keeps their memory alive), on the tier that
// `options` choose. Checked first, every failure an Error naming `what` and the field or array: the
// header's version and fields, each array's length against the layout the header implies, its
// 64-byte alignment, the nm masks' kept bits per row and superchunk (what bounds the kernels'
// reads), and INT8 scales (finite, not negative). The values and codes themselves are trusted, as
// a GGUF reader trusts a tensor's bytes.
Result<SparseLinear> layer_from_records(const StoredRecords& records, std::shared_ptr<const void> owner,
                                        const LinearOptions& options, const std::string& what);

}  // namespace nmkit::linear
