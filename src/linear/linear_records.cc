// A SparseLinear's packed records, stored and read back in place (linear_records.h; docs/design.md
// 11.9).
#include "linear/linear_records.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "linear/linear_pack.h"
#include "linear/sparse_linear_access.h"
#include "nmkit/slide.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/threads.h"

namespace nmkit::linear {

using cpu::AlignedBytes;
using cpu::PackedLinear;

namespace {

constexpr int32_t kRecordVersion = 1;
// Header fields.
enum Field {
  kVersion, kKind, kDtype, kRows, kStoredK, kKeep, kGroup, kSlideKeep, kSlideGroup, kSlideAlign, kLogicalK, kHasBias,
};
static_assert(kHasBias + 1 == kRecordHeaderFields);

// The numbers the header gives kinds and dtypes (fixed: they are in files).
constexpr WeightFormat kKinds[] = {WeightFormat::Dense, WeightFormat::Sparse24, WeightFormat::NM};
constexpr DType kDtypes[] = {DType::F32, DType::BF16, DType::I8};

template <class T, size_t N>
int32_t number_of(const T (&table)[N], T value) {
  for (size_t i = 0; i < N; ++i) {
    if (table[i] == value) return static_cast<int32_t>(i);
  }
  return -1;
}

AlignedBytes& array_of(PackedLinear& p, int array) {
  AlignedBytes* arrays[kRecordArrays] = {&p.values, &p.meta, &p.row_scale, &p.row_sum, &p.bias};
  return *arrays[array];
}
const AlignedBytes& array_of(const PackedLinear& p, int array) { return array_of(const_cast<PackedLinear&>(p), array); }

// A dense f32/bf16 layer reading rows it does not own (a file's, in place): its parts one after
// another, zero past them.
StoredArray borrowed_rows(const PackedLinear& p) {
  const size_t row_bytes = static_cast<size_t>(p.K) * dtype_size(p.dtype);
  StoredArray out;
  out.bytes = AlignedBytes::stored_bytes(static_cast<size_t>(p.rows) * row_bytes);
  out.write = [&p, row_bytes, total = out.bytes](std::byte* dst) {
    std::byte* at = dst;
    for (const cpu::RowPart& part : p.parts) {
      const size_t ld = static_cast<size_t>(part.ld) * dtype_size(p.dtype);
      for (int64_t r = 0; r < part.rows; ++r, at += row_bytes) std::memcpy(at, part.data + r * ld, row_bytes);
    }
    std::memset(at, 0, total - static_cast<size_t>(at - dst));
  };
  return out;
}

// The bits set in each byte of x, in that byte. std::popcount calls libgcc's table routine where
// the build targets baseline x86-64 (no POPCNT), several times slower than these sums of bit fields.
uint64_t byte_bits(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  return (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
}

int64_t bits_set(uint64_t x) { return static_cast<int64_t>((byte_bits(x) * 0x0101010101010101ULL) >> 56); }

int64_t bits_set(const uint8_t* p, int64_t bytes) {
  int64_t bits = 0, i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    bits += bits_set(word);
  }
  if (i < bytes) {
    uint64_t word = 0;
    std::memcpy(&word, p + i, static_cast<size_t>(bytes - i));
    bits += bits_set(word);
  }
  return bits;
}

// The bits set in each of a row block's four records of one superchunk, `stride` mask bytes each,
// which lie together. Records of 4 bytes (f32/bf16 nm, superchunks of 32 K) go two to a word.
void record_bits(const uint8_t* p, int64_t stride, int64_t (&bits)[cpu::kLinearRowBlock]) {
  static_assert(cpu::kLinearRowBlock == 4);
  if (stride == 4) {
    for (int w = 0; w < 2; ++w) {
      uint64_t word;
      std::memcpy(&word, p + 8 * w, 8);
      const uint64_t counts = byte_bits(word);  // at most 8 a byte: a half's sum fits its top byte
      bits[2 * w] = static_cast<int64_t>((((counts & 0xFFFFFFFFULL) * 0x01010101ULL) >> 24) & 0xFF);
      bits[2 * w + 1] = static_cast<int64_t>((((counts >> 32) * 0x01010101ULL) >> 24) & 0xFF);
    }
    return;
  }
  for (int r = 0; r < cpu::kLinearRowBlock; ++r) bits[r] = bits_set(p + r * stride, stride);
}

// Every nm record (row, superchunk) holds at most keep mask bits per real group of its superchunk,
// and none in padding rows: a kernel consumes as many values as its mask has bits, from the
// record's fixed offset, so this bounds its reads. A row block's records of one superchunk lie
// together; the first record over its bound, in memory order, is named.
Status check_masks(const PackedLinear& p, const std::string& what) {
  const int64_t superchunks = p.K_x / p.superchunk, per_chunk = p.superchunk / p.pattern.group;
  const int64_t groups = p.pattern.groups(p.K);
  const auto* masks = p.meta.as<uint8_t>();
  std::atomic<int64_t> bad{std::numeric_limits<int64_t>::max()};
  parallel_for(p.row_blocks, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t real_rows = std::min<int64_t>(cpu::kLinearRowBlock, p.rows - b * cpu::kLinearRowBlock);
      for (int64_t c = 0; c < superchunks; ++c) {
        const int64_t allowed = std::clamp<int64_t>(groups - c * per_chunk, 0, per_chunk) * p.pattern.keep;
        const int64_t first = (b * superchunks + c) * cpu::kLinearRowBlock;
        int64_t bits[cpu::kLinearRowBlock];
        record_bits(masks + first * p.mask_stride, p.mask_stride, bits);
        for (int r = 0; r < cpu::kLinearRowBlock; ++r) {
          if (bits[r] > (r < real_rows ? allowed : 0)) {
            int64_t seen = bad.load(std::memory_order_relaxed);
            while (first + r < seen && !bad.compare_exchange_weak(seen, first + r)) {
            }
          }
        }
      }
    }
  });
  const int64_t record = bad.load();
  if (record == std::numeric_limits<int64_t>::max()) return ok_status();
  const int64_t r = record % cpu::kLinearRowBlock, c = record / cpu::kLinearRowBlock % superchunks;
  const int64_t row = record / cpu::kLinearRowBlock / superchunks * cpu::kLinearRowBlock + r;
  return Error(what + ": mask of row " + std::to_string(row) + ", K " + std::to_string(c * p.superchunk) + "-" +
               std::to_string((c + 1) * p.superchunk - 1) + " has more bits than " + p.pattern.str() + " keeps");
}

Status check_scales(const PackedLinear& p, const std::string& what) {
  const auto* scales = p.row_scale.as<float>();
  for (int64_t r = 0; r < p.rows; ++r) {
    if (!(scales[r] >= 0.0f) || !std::isfinite(scales[r])) {
      return Error(what + ": scale of row " + std::to_string(r) + " is " + std::to_string(scales[r]) +
                   ", not a finite non-negative number");
    }
  }
  return ok_status();
}

Error field_error(const std::string& what, const char* field, int64_t value) {
  return Error(what + ": record header field " + field + " = " + std::to_string(value) + " is not valid");
}

}  // namespace

std::string_view record_array_name(int array) {
  constexpr std::string_view kNames[kRecordArrays] = {"values", "meta", "scale", "sum", "bias"};
  return kNames[array];
}

Result<RecordsToStore> records_of(const SparseLinear& layer) {
  const PackedLinear& p = SparseLinearAccess::packed(layer);
  const int64_t stored_k = p.slide ? p.slide->K_prime() : p.K;
  const int64_t fields[kRecordHeaderFields] = {
      kRecordVersion,
      number_of(kKinds, p.kind),
      number_of(kDtypes, p.dtype),
      p.rows,
      stored_k,
      p.kind == WeightFormat::NM ? p.pattern.keep : 0,
      p.kind == WeightFormat::NM ? p.pattern.group : 0,
      p.slide ? p.slide->pattern.keep : 0,
      p.slide ? p.slide->pattern.group : 0,
      p.slide ? p.slide->align : 0,
      p.K,
      p.has_bias ? 1 : 0};
  RecordsToStore out;
  for (const int64_t f : fields) {
    if (f < 0 || f > std::numeric_limits<int32_t>::max()) {
      return Error("linear records: a header field is " + std::to_string(f) + ", outside int32");
    }
    out.header.push_back(static_cast<int32_t>(f));
  }
  for (int a = 0; a < kRecordArrays; ++a) {
    const AlignedBytes& bytes = array_of(p, a);
    if (a == 0 && p.kind == WeightFormat::Dense && bytes.data == nullptr) {
      out.arrays[a] = borrowed_rows(p);
      continue;
    }
    if (bytes.data == nullptr) continue;
    // A layer's own arrays (AlignedBytes::zeros) and those it borrows from records hold
    // stored_bytes(allocated), zero past what was written.
    out.arrays[a].bytes = AlignedBytes::stored_bytes(bytes.allocated);
    out.arrays[a].write = [data = bytes.data.get(), n = out.arrays[a].bytes](std::byte* dst) { std::memcpy(dst, data, n); };
  }
  return out;
}

Result<SparseLinear> layer_from_records(const StoredRecords& records, std::shared_ptr<const void> owner,
                                        const LinearOptions& options, const std::string& what) {
  const auto& h = records.header;
  if (h.size() != kRecordHeaderFields) {
    return Error(what + ": record header has " + std::to_string(h.size()) + " fields, not " + std::to_string(kRecordHeaderFields));
  }
  if (h[kVersion] != kRecordVersion) return field_error(what, "version", h[kVersion]);
  if (h[kKind] < 0 || h[kKind] >= 3) return field_error(what, "kind", h[kKind]);
  if (h[kDtype] < 0 || h[kDtype] >= 3) return field_error(what, "dtype", h[kDtype]);
  cpu::RecordForm form{kKinds[h[kKind]], kDtypes[h[kDtype]], h[kRows], h[kStoredK]};
  if (form.kind == WeightFormat::NM) {
    if (h[kGroup] < 1 || h[kKeep] < 1 || h[kKeep] > h[kGroup]) return field_error(what, "keep:group", h[kKeep]);
    form.pattern = Pattern{h[kKeep], h[kGroup]};
  } else if (h[kKeep] != 0 || h[kGroup] != 0) {
    return field_error(what, "keep", h[kKeep]);
  }
  if (h[kHasBias] != 0 && h[kHasBias] != 1) return field_error(what, "bias", h[kHasBias]);
  auto layout = cpu::record_layout(form, false, what);
  if (!layout.ok()) return layout.error();
  PackedLinear& p = **layout;
  if (h[kSlideKeep] != 0) {
    auto geometry = SlideGeometry::make(Pattern{h[kSlideKeep], h[kSlideGroup]}, h[kLogicalK], h[kSlideAlign]);
    if (!geometry.ok()) return geometry.error().with_context(what + ": record header: ");
    if (form.kind != WeightFormat::Sparse24 || geometry->K_prime() != form.K) {
      return field_error(what, "slide width (K_prime)", form.K);
    }
    p.slide = *geometry;
    p.K = geometry->K;
    if (form.dtype != DType::I8) {  // an nm weight run slid: X lifted through the map on every call
      p.pattern = geometry->pattern;
      for (const int64_t source : lift_index_map(*geometry)) p.lift_source.push_back(static_cast<int32_t>(source));
    }
  } else if (h[kLogicalK] != form.K) {
    return field_error(what, "K", h[kLogicalK]);
  }
  if (h[kHasBias] == 1) {
    p.bias = AlignedBytes::reserved(static_cast<size_t>(p.rows) * 4);
    p.has_bias = true;
  }
  for (int a = 0; a < kRecordArrays; ++a) {
    AlignedBytes& bytes = array_of(p, a);
    const size_t expected = bytes.allocated > 0 ? AlignedBytes::stored_bytes(bytes.allocated) : 0;
    const std::span<const std::byte> stored = records.arrays[a];
    if (stored.size() != expected) {
      return Error(what + ": " + std::string(record_array_name(a)) + " holds " + std::to_string(stored.size()) +
                   " bytes, the record header's layout needs " + std::to_string(expected));
    }
    if (expected == 0) continue;
    if (reinterpret_cast<uintptr_t>(stored.data()) % 64 != 0) {
      return Error(what + ": " + std::string(record_array_name(a)) + " is not 64-byte aligned");
    }
    const size_t size = bytes.size, allocated = bytes.allocated;
    bytes = AlignedBytes::borrowed(stored.data(), allocated);
    bytes.size = size;
  }
  if (p.kind == WeightFormat::Dense) p.parts = {cpu::RowPart{p.values.data.get(), p.rows, p.parts[0].ld}};
  if (p.kind == WeightFormat::NM) NMKIT_TRY(check_masks(p, what));
  if (p.dtype == DType::I8) NMKIT_TRY(check_scales(p, what));
  p.owner = std::move(owner);
  cpu::count_streamed_bytes(p);
  return SparseLinearAccess::finish(std::move(*layout), options);
}

}  // namespace nmkit::linear
