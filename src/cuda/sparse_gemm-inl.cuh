// One body for the scaled sparse GEMMs (sparse_gemm.h): CUTLASS 2.x SparseGemmWithVisitor with an
// epilogue visitor tree (CUTLASS example 15, ampere_sparse_tensorop_gemm_with_visitor.cu) that
// multiplies the accumulators by the token scale (a row broadcast over D's columns) times the
// channel scale (a column broadcast over D's rows), adds the bias and stores D column-major, i.e.
// Y [tokens, rows] row-major. Included by one .cu per element type; no include guard.
// The device header first: visitors.hpp relies on what it declares (as in CUTLASS's example).
#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm_sparse_with_visitor.h"
#include "cutlass/epilogue/threadblock/fusion/visitors.hpp"

#include "cuda/sparse_gemm.h"

namespace nmkit::cuda {
namespace {

using namespace cute;
using namespace cutlass::epilogue::threadblock;

// Element: int8_t or cutlass::float_e4m3_t; Accumulator: int32_t or float.
template <class Element, class Accumulator, class MathOperator>
struct ScaledSparseGemm {
  // 128 x 128 threadblock tiles of 128 K in 3 stages, 64 x 64 warp tiles: the shape CUTLASS's
  // examples and profiler use for 8-bit sparse GEMMs on SM80 (mma.sp m16n8k64). One shape per type
  // keeps CI's compile short; a small-token shape is the next thing to add (issue 27).
  using ThreadblockShape = cutlass::gemm::GemmShape<128, 128, 128>;
  using WarpShape = cutlass::gemm::GemmShape<64, 64, 128>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 64>;
  static constexpr int kStages = 3;
  static constexpr int kEpilogueStages = 1;
  static constexpr int kAlignment = 16;  // 8-bit elements per 128-bit access
  using Output = float;
  // D is stored one element per access: column-major stores are strided along the tile's rows, and
  // each threadblock tile fills whole 512-byte columns of Y, which L2 merges.
  using ThreadMap = OutputTileThreadLayout<ThreadblockShape, WarpShape, Output, 1, kEpilogueStages>;

  using Acc = VisitorAccFetch;
  using TokenScale = VisitorRowBroadcast<ThreadMap, float, Stride<_0, _1, int64_t>>;
  using ChannelScale = VisitorColBroadcast<ThreadMap, float, Stride<_1, _0, int64_t>>;
  using Bias = VisitorColBroadcast<ThreadMap, float, Stride<_1, _0, int64_t>>;
  using Multiply = VisitorCompute<cutlass::multiplies, float, float, cutlass::FloatRoundStyle::round_to_nearest>;
  using Add = VisitorCompute<cutlass::plus, float, float, cutlass::FloatRoundStyle::round_to_nearest>;
  using Scales = Sm80EVT<Multiply, TokenScale, ChannelScale>;
  using Scaled = Sm80EVT<Multiply, Acc, Scales>;
  using Biased = Sm80EVT<Add, Scaled, Bias>;
  using Store = VisitorAuxStore<ThreadMap, Output, cutlass::FloatRoundStyle::round_to_nearest,
                                Stride<_1, int64_t, int64_t>>;
  using Tree = Sm80EVT<Store, Biased>;

  using Gemm = cutlass::gemm::device::SparseGemmWithVisitor<
      Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor, Output,
      cutlass::layout::RowMajor, Accumulator, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      ThreadblockShape, WarpShape, InstructionShape, Tree,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages, kAlignment, kAlignment,
      MathOperator, kEpilogueStages>;
  using ElementE = typename Gemm::ElementE;
  using LayoutE = typename Gemm::LayoutE;
  static_assert(sizeof(ElementE) == 4, "8-bit operands read 32-bit metadata words");

  static cudaError_t run(const SparseGemmArgs& a, cudaStream_t stream) {
    const cutlass::gemm::GemmCoord size(static_cast<int>(a.rows), static_cast<int>(a.tokens),
                                        static_cast<int>(a.K));
    const int64_t batch_y = a.rows * a.tokens;
    typename Tree::Arguments epilogue{
        {  // Biased
         {  // Scaled
          {},  // Acc
          {    // Scales
           {static_cast<const float*>(a.scale_x), 0.0f, {_0{}, _1{}, a.tokens}},
           {static_cast<const float*>(a.scale_w), 0.0f, {_1{}, _0{}, a.rows}},
           {}},
          {}},
         // -0.0f: x + -0 == x for every x, +0 and -0 included (sparse_gemm.h).
         {a.bias, -0.0f, {_1{}, _0{}, a.rows}},
         {}},
        {a.y, {_1{}, a.rows, batch_y}}};
    typename Gemm::Arguments arguments{
        size,
        {static_cast<const Element*>(a.values), cutlass::layout::RowMajor(static_cast<int>(a.K / 2))},
        {static_cast<const Element*>(a.x), cutlass::layout::ColumnMajor(static_cast<int>(a.K))},
        {static_cast<ElementE*>(const_cast<void*>(a.meta)), LayoutE(static_cast<int>(2 * a.rows))},
        epilogue};
    if (Gemm::can_implement(arguments) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    Gemm gemm;
    if (gemm.initialize(arguments, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaGetLastError();
    return cudaSuccess;
  }
};

}  // namespace
}  // namespace nmkit::cuda
