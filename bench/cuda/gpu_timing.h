// What the GPU benchmarks (bench/cuda) share: the median of timings, and the write that evicts L2
// between timed calls so each call reads its operands from device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace nmkit::bench_cuda {

// The median, -1 for no timings.
template <class T>
double median(std::vector<T> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}

// A 256 MiB write between timed calls: more than any L2 (H100: 50 MB, H200: 60 MB).
struct L2Flush {
  void* buffer = nullptr;
  static constexpr size_t kBytes = size_t{256} << 20;
  L2Flush() { cudaMalloc(&buffer, kBytes); }
  ~L2Flush() { cudaFree(buffer); }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;
  bool ok() const { return buffer != nullptr; }
  void run(cudaStream_t stream) const { cudaMemsetAsync(buffer, 0, kBytes, stream); }
};

}  // namespace nmkit::bench_cuda
