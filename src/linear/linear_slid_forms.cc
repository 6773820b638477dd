#include "linear/linear_slid_forms.h"

#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cpu/linear_common.h"
#include "linear/linear_driver.h"
#include "linear/linear_pack.h"
#include "nmkit/quant.h"
#include "nmkit/slide.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {
namespace {

// Row r of a row block's dense tile (decompress_block) at column j: chunks of 4 rows x 32 floats, or
// the INT8 chunks of 128 K, the last of 64 where K_x is an odd multiple of 64 (cpu/linear_common.h).
template <class T>
T tile_at(const PackedLinear& w, const std::vector<T>& tile, int64_t r, int64_t j) {
  if constexpr (std::is_same_v<T, int8_t>) {
    return tile[static_cast<size_t>(int8_chunk_offset(w.K_x, j / kLinearChunkInt8, r) + j % kLinearChunkInt8)];
  } else {
    return tile[static_cast<size_t>(((j / kLinearChunk) * kLinearRowBlock + r) * kLinearChunk + j % kLinearChunk)];
  }
}

// The dense rows of a packed sparse weight. A slid weight's rows fold back onto the K columns they
// were slid from: each non-zero sits in exactly one window, so this is a scatter through the lifting
// map; an unslid sparse24 weight's columns are its own. T is int8 (codes) or float.
template <class T>
Tensor unslide_rows(const PackedLinear& w, DType dtype) {
  const int64_t K = w.slide ? w.slide->K : w.K;
  // The column of K each stored column holds (-1: none).
  std::vector<int64_t> source = w.slide ? lift_index_map(*w.slide) : std::vector<int64_t>(static_cast<size_t>(K));
  if (!w.slide) std::iota(source.begin(), source.end(), int64_t{0});
  Tensor out = Tensor::zeros(dtype, {w.rows, K});
  std::vector<T> tile(tile_bytes(w) / sizeof(T));
  for (int64_t b = 0; b < w.row_blocks; ++b) {
    decompress_block(w, b, tile.data());
    for (int64_t r = 0; r < kLinearRowBlock && b * kLinearRowBlock + r < w.rows; ++r) {
      T* to = out.as<T>() + (b * kLinearRowBlock + r) * K;
      for (int64_t j = 0; j < static_cast<int64_t>(source.size()); ++j) {
        const T value = tile_at(w, tile, r, j);
        if (value != T{0} && source[static_cast<size_t>(j)] >= 0) to[source[static_cast<size_t>(j)]] = value;
      }
    }
  }
  return out;
}

// INT8 (slid or sparse24): the per-row scales stay (the same values, so the same maximum), and the
// lifted activations quantize to the same codes as the unlifted ones (every column appears, so the
// same maximum): the product is the same integer sum, bit for bit (docs/design.md 5-6).
std::unique_ptr<PackedLinear> unslide_int8(const PackedLinear& w) {
  Tensor codes = unslide_rows<int8_t>(w, DType::I8);
  Tensor scales = Tensor::empty(DType::F32, {w.rows});
  std::memcpy(scales.as<float>(), w.row_scale.as<float>(), static_cast<size_t>(w.rows) * 4);
  auto packed = pack_dense_int8(Quantized{QuantType::Int8, std::move(codes), std::move(scales)});
  NMKIT_ASSERT(packed.ok());  // the slid weight passed the same checks over the wider K_prime
  return std::move(*packed);
}

// f32/bf16: the unslid weight (exact: bf16 values widen to f32 and narrow back unchanged) packed nm.
std::unique_ptr<PackedLinear> unslide_nm(const PackedLinear& w) {
  Tensor dense = unslide_rows<float>(w, DType::F32);
  if (w.dtype == DType::BF16) dense = Tensor::from_f32(dense.to_f32(), {w.rows, w.K}, DType::BF16);
  auto nm = compress_nm(dense.view(), w.pattern, "nm weight");
  NMKIT_ASSERT(nm.ok());  // it complied before it was slid
  auto packed = pack_nm(*nm);
  NMKIT_ASSERT(packed.ok());
  return std::move(*packed);
}

}  // namespace

bool nm_runs_slid(Pattern pattern, IsaTier tier) {
  // keep = 2N-2 fills every window; below it the 2:4 windows would store more slots than nm does.
  // Groups over 16 go to pack_nm, which refuses them.
  return tier >= IsaTier::Avx512 && pattern.group % 2 == 0 && pattern.group >= 6 && pattern.group <= 16 &&
         pattern.keep == pattern.group - 2;
}

Result<std::unique_ptr<PackedLinear>> pack_nm_as_slid(const NMPacked& weight) {
  NMKIT_TRY(validate(weight, "nm weight"));
  const Tensor dense = decompress(weight);
  auto slid = slide(dense.view(), weight.pattern, 32, "nm weight");
  if (!slid.ok()) return slid.error();
  auto windows = compress_sparse24(slid->weight.view(), "nm weight");
  if (!windows.ok()) return windows.error();
  auto packed = pack_sparse24(*windows);
  if (!packed.ok()) return packed.error();
  PackedLinear& w = **packed;
  w.slide = slid->geometry;
  w.K = weight.K;
  w.pattern = weight.pattern;
  for (int64_t source : lift_index_map(slid->geometry)) w.lift_source.push_back(static_cast<int32_t>(source));
  return packed;
}

const PackedLinear& many_tokens_form(const PackedLinear& w) {
  std::call_once(w.many_tokens_once, [&w] {
    auto form = w.dtype == DType::I8 ? unslide_int8(w) : unslide_nm(w);
    form->tier = w.tier;
    form->bf16_x = w.bf16_x;
    copy_bias(w, *form);
    w.many_tokens = std::move(form);
  });
  return *w.many_tokens;
}

void copy_bias(const PackedLinear& from, PackedLinear& to) {
  if (!from.has_bias) return;
  to.bias = AlignedBytes::zeros(from.bias.size);
  std::memcpy(to.bias.data.get(), from.bias.data.get(), from.bias.size);
  to.has_bias = true;
}

void lift_token(const PackedLinear& w, const float* x, float* dst) {
  const int64_t lifted = static_cast<int64_t>(w.lift_source.size());
  for (int64_t j = 0; j < lifted; ++j) {
    const int32_t source = w.lift_source[static_cast<size_t>(j)];
    dst[j] = source >= 0 ? x[source] : 0.0f;
  }
  std::memset(dst + lifted, 0, static_cast<size_t>(w.K_x - lifted) * 4);
}

}  // namespace nmkit::cpu
