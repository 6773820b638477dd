// One body for the sparse GEMMs (sparse_gemm.h): CUTLASS 2.x SparseGemm, W row-major (the
// compressed operand A), X's codes column-major (B), the accumulators D row-major through
// LinearCombination with ScaleType::Nothing (D = A x B, no alpha, beta or C). Included by one .cu
// per element type and tile; no include guard.
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_sparse.h"

#include "cuda/sparse_gemm.h"

namespace nmkit::cuda {
namespace {

// Element: int8_t or cutlass::float_e4m3_t; Accumulator: int32_t or float. TileRows x TileTokens
// threadblock tiles of 128 K in 3 stages, 64 x 64 warps, mma.sp m16n8k64: the shapes CUTLASS's
// profiler instantiates for 8-bit sparse GEMMs on SM80.
template <class Element, class Accumulator, class MathOperator, int TileRows, int TileTokens>
struct SparseGemmKernel {
  using ThreadblockShape = cutlass::gemm::GemmShape<TileRows, TileTokens, 128>;
  using WarpShape = cutlass::gemm::GemmShape<64, 64, 128>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 64>;
  static constexpr int kStages = 3;
  static constexpr int kAlignment = 16;  // 8-bit elements per 128-bit access
  static constexpr int kAccAlignment = 128 / cutlass::sizeof_bits<Accumulator>::value;
  using Epilogue = cutlass::epilogue::thread::LinearCombination<Accumulator, kAccAlignment, Accumulator, Accumulator,
                                                                cutlass::epilogue::thread::ScaleType::Nothing>;
  using Gemm = cutlass::gemm::device::SparseGemm<
      Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor, Accumulator,
      cutlass::layout::RowMajor, Accumulator, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape,
      WarpShape, InstructionShape, Epilogue, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, kStages,
      kAlignment, kAlignment, false, MathOperator>;
  using ElementE = typename Gemm::ElementE;
  using LayoutE = typename Gemm::LayoutE;
  static_assert(sizeof(ElementE) == 4, "8-bit operands read 32-bit metadata words");
  static_assert(std::is_same_v<LayoutE, cutlass::layout::ColumnMajorInterleaved<2>>,
                "the metadata layout of include/nmkit/cutlass_sm80.h");
  static_assert(std::is_same_v<typename Gemm::LayoutC, cutlass::layout::RowMajor> == kSparseGemmAccRowsMajor,
                "the accumulators' layout that device_layout.h gives the epilogue");

  static cudaError_t run(const SparseGemmArgs& a, cudaStream_t stream) {
    const cutlass::gemm::GemmCoord size(static_cast<int>(a.rows), static_cast<int>(a.tokens), static_cast<int>(a.K));
    auto* acc = static_cast<Accumulator*>(a.acc);
    const cutlass::layout::RowMajor acc_layout(static_cast<int>(a.tokens));  // ld = tokens: sparse_gemm.h
    typename Gemm::Arguments arguments{
        size,
        {static_cast<const Element*>(a.values), cutlass::layout::RowMajor(static_cast<int>(a.K / 2))},
        {static_cast<const Element*>(a.x), cutlass::layout::ColumnMajor(static_cast<int>(a.K))},
        {acc, acc_layout},  // C: not read (ScaleType::Nothing)
        {acc, acc_layout},
        {static_cast<ElementE*>(const_cast<void*>(a.meta)), LayoutE(static_cast<int>(2 * a.rows))},
        {}};
    Gemm gemm;
    if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (gemm.initialize(arguments, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaGetLastError();
    return cudaSuccess;
  }
};

}  // namespace
}  // namespace nmkit::cuda
