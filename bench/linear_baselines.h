// Real baselines of `nmkit bench linear`: OpenBLAS (sgemv/sgemm), oneDNN matmul (f32, bf16, int8) and
// Eigen's CSR sparse x dense product. Each computes Y[M, rows] = X[M, K] * W^T into f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nmkit::bench {

// Whether each library was found at build time.
bool have_openblas();
bool have_onednn();
bool have_eigen();

// OpenBLAS's chosen kernel ("Haswell", "SkylakeX", ...), or "" without OpenBLAS.
std::string openblas_core();
// Sets OpenBLAS's thread count (oneDNN and Eigen take OMP_NUM_THREADS, set by the re-exec).
void openblas_threads(int threads);

// W f32 [rows, K] row-major, copied. run(): sgemv for M == 1, else sgemm.
class OpenBlasLinear {
 public:
  OpenBlasLinear(const float* w, int64_t rows, int64_t K);
  void run(const float* x, int64_t M, float* y) const;
  size_t weight_bytes() const { return w_.size() * 4; }

 private:
  std::vector<float> w_;
  int64_t rows_, K_;
};

// oneDNN matmul with weights reordered once into the layout oneDNN prefers for this M (plain = false)
// or kept in the caller's row-major layout (plain = true).
// Types: "f32" (f32 X and W), "bf16" (bf16 X and W, f32 Y), "int8" (s8 X with one scale for the
// tensor, s8 W with per-row scales, f32 Y).
class OneDnnLinear {
 public:
  // w: [rows, K] as f32 values (f32/bf16: exact in the type), or int8 codes (int8: w_i8 + scales).
  static std::unique_ptr<OneDnnLinear> make(const std::string& type, bool plain, int64_t M, int64_t rows, int64_t K,
                                            const float* w_f32, const int8_t* w_i8, const float* w_scales);
  virtual ~OneDnnLinear() = default;
  // x: f32 for "f32", bf16 bits for "bf16", int8 codes for "int8" (x_scale used for int8 only).
  virtual void run(const void* x, float x_scale, float* y) = 0;
  virtual size_t weight_bytes() const = 0;
};

// Eigen::SparseMatrix<float, RowMajor> of the nonzeros of W (f32 [rows, K]).
class EigenCsrLinear {
 public:
  EigenCsrLinear(const float* w, int64_t rows, int64_t K);
  ~EigenCsrLinear();
  void run(const float* x, int64_t M, float* y) const;
  size_t weight_bytes() const;  // values + column indices + row pointers
  int threads() const;          // Eigen's OpenMP threads for this product

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmkit::bench
