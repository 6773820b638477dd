// The quantization row pipeline shared by the SIMD tiers (docs/design.md section 6): absmax, scale, codes,
// then the fused lift and the optional streaming copy, over a two-row software pipeline. One body,
// included by src/cpu/avx2/quant_rows.cc and src/cpu/avx512/quant_rows.cc inside their own tier
// namespace (nmkit::cpu::<tier>), so each copy is compiled with that tier's flags only and the tiers
// cannot drift apart (gemma.cpp's per-target -inl.h pattern).
//
// The including file defines, in an anonymous namespace before the include:
//   uint32_t abs_bits_max_f32(const std::byte* src, int64_t K);   // largest |x| bits of a row
//   uint32_t abs_bits_max_16(const std::byte* src, int64_t K);    // the same for bf16/f16
//   template <DType D, QuantType T> void quantize_row(src, K, inv, uint8_t* dst, next_row_or_null);
//   void gather_row(const LiftPhases&, const uint8_t* codes, uint8_t* dst, int64_t cols);
//   void stream_row(uint8_t* dst, const uint8_t* src, int64_t n);  // non-temporal copy
//   constexpr LiftPhases LiftTable::* kGatherPhases;               // &LiftTable::v16 or v64
// No include guard: each tier's translation unit includes it once.

namespace {

template <DType D, QuantType T>
int64_t rows_impl(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch) {
  constexpr float qmax = T == QuantType::Int8 ? 127.0f : 448.0f;
  const uint32_t nonfinite = D == DType::F32 ? 0x7F800000u : (D == DType::BF16 ? 0x7F80u : 0x7C00u);
  const bool gather = args.lift != nullptr && args.lift->N > 2;
  const bool staged = gather || args.stream;  // codes go through scratch rather than straight to dst
  const int64_t codes_bytes = quant_codes_bytes(args.lift, args.K, args.cols);
  uint8_t* codes[2];
  uint8_t* staging[2];
  for (int i = 0; i < 2; ++i) {
    codes[i] = reinterpret_cast<uint8_t*>(scratch + quant_codes_offset(args.lift, args.K, args.cols, i));
    staging[i] = reinterpret_cast<uint8_t*>(scratch + quant_staging_offset(args.lift, args.K, args.cols, i));
    if (staged) std::memset(codes[i] + args.K, 0, static_cast<size_t>(codes_bytes - args.K));
  }
  const auto dst_row = [&](int64_t m) { return reinterpret_cast<uint8_t*>(args.dst + m * args.dst_stride); };
  // Staged rows run as a pipeline over two buffers: step m streams row m-2, gathers row m-1 and
  // quantizes row m, so no load reads bytes stored in the same step (a 64-byte load spanning two
  // recent stores cannot be forwarded from the store buffer and waits for them to retire).
  const int64_t last = staged ? end + 2 : end;
  for (int64_t m = begin; m < last; ++m) {
    if (args.stream && m - 2 >= begin) {
      const int b = static_cast<int>((m - 2) & 1);
      stream_row(dst_row(m - 2), gather ? staging[b] : codes[b], args.cols);  // zeros past K: padding
    }
    if (gather && m - 1 >= begin && m - 1 < end) {
      const int b = static_cast<int>((m - 1) & 1);
      gather_row(args.lift->*kGatherPhases, codes[b], args.stream ? staging[b] : dst_row(m - 1), args.cols);
    }
    if (m >= end) continue;
    const std::byte* src = args.src + m * args.src_stride;
    uint8_t* target = staged ? codes[m & 1] : dst_row(m);
    const std::byte* next = m + 1 < end ? src + args.src_stride : nullptr;
    const uint32_t bits = D == DType::F32 ? abs_bits_max_f32(src, args.K) : abs_bits_max_16(src, args.K);
    if (bits >= nonfinite) return m;
    if (bits == 0) {  // absmax 0: scale 1 and every code 0 (include/nmkit/quant.h)
      std::memset(target, 0, static_cast<size_t>(args.K));
      args.scales[m] = 1.0f;
    } else {
      const float absmax = abs_bits_to_f32(D, bits);
      const float inv = qmax / absmax;
      args.scales[m] = absmax / qmax;
      if (__builtin_isfinite(inv)) {
        quantize_row<D, T>(src, args.K, inv, target, next);
      } else {
        quantize_row_values(args, src, inv, target);
      }
    }
    if (!staged && args.cols > args.K) {  // 2:4 lifting: identity plus zero padding
      std::memset(target + args.K, 0, static_cast<size_t>(args.cols - args.K));
    }
  }
  if (args.stream) _mm_sfence();  // order the non-temporal stores before the pool's completion signal
  return -1;
}

template <DType D>
QuantRowsFn pick(QuantType type) {
  return type == QuantType::Int8 ? rows_impl<D, QuantType::Int8> : rows_impl<D, QuantType::E4M3>;
}

}  // namespace

int64_t quantize_rows(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch) {
  QuantRowsFn fn = args.src_dtype == DType::F32    ? pick<DType::F32>(args.type)
                   : args.src_dtype == DType::BF16 ? pick<DType::BF16>(args.type)
                                                   : pick<DType::F16>(args.type);
  return fn(args, begin, end, scratch);
}
