#include "linear/onednn_matmul.h"

#include <dlfcn.h>

#include <array>
#include <dnnl.hpp>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "nmkit/threads.h"

namespace nmkit::linear {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const dnnl::engine& engine() {
  static const dnnl::engine cpu((onednn_tier(), dnnl::engine::kind::cpu), 0);
  return cpu;
}

dt weight_type(MatmulType type) {
  return type == MatmulType::F32 ? dt::f32 : type == MatmulType::Bf16 ? dt::bf16 : dt::s8;
}
dt output_type(MatmulType type) { return type == MatmulType::Int8 ? dt::s32 : dt::f32; }

// Debian's libdnnl runs on OpenMP (libgomp, loaded with it). Its thread count follows the caller's
// (nmkit's pool, NMKIT_THREADS, or 1 for a call too short to wake the team) when the runtime exports
// omp_set_num_threads; looked up at run time so that this file links no OpenMP runtime of its own.
// oneDNN reads the count when it builds a primitive (its work split) and when it runs one.
void set_thread_count(int threads) {
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set != nullptr) set(threads);  // per calling thread (an OpenMP ICV), so every call
}

// The calling thread's OpenMP thread count, or 0 without the runtime.
int current_thread_count() {
  using GetThreads = int (*)();
  static const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return get != nullptr ? get() : 0;
}

// Sets the count for one oneDNN call and gives the caller's back after it: the count is the calling
// thread's own setting, which its other OpenMP code (or another library's oneDNN calls: `nmkit bench
// linear`'s baseline ran on one thread after each of nmkit's one-thread calls) would otherwise inherit.
class ThreadCountForCall {
 public:
  explicit ThreadCountForCall(int threads) : before_(current_thread_count()) { set_thread_count(threads); }
  ~ThreadCountForCall() {
    if (before_ > 0) set_thread_count(before_);
  }
  ThreadCountForCall(const ThreadCountForCall&) = delete;
  ThreadCountForCall& operator=(const ThreadCountForCall&) = delete;

 private:
  int before_;
};

// The scratchpad is the caller's (scratchpad_mode::user, a buffer per calling thread in run()): in
// the library's own mode one scratchpad is shared by every primitive, so a primitive may only run
// on the thread that created it, and never on two threads at once, while a layer's primitives are
// shared by every thread that applies it (two threads applying a 37x300 slid INT8 layer at 24 tokens
// got wrong rows about once in twelve tries).
dnnl::matmul::primitive_desc describe(MatmulType type, int64_t M, int64_t rows, int64_t K, int64_t ldx,
                                      const dnnl::memory::desc& weights) {
  const dnnl::memory::desc src({M, K}, weight_type(type), dnnl::memory::dims{ldx, 1});
  const dnnl::memory::desc dst({M, rows}, output_type(type), tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, engine());
}

Error onednn_error(const char* what, const std::exception& e) {
  return Error(std::string("linear: oneDNN ") + what + ": " + e.what());
}

}  // namespace

IsaTier onednn_tier() {
  static const IsaTier tier = [] {
    const auto active = active_tier();
    if (!active.ok() || *active != IsaTier::Avx2 || detected_tier() == IsaTier::Avx2) return detected_tier();
    // AVX2 without VNNI: the x86-64-v3 machine nmkit's AVX2 tier is written for.
    return dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) == dnnl::status::success ? IsaTier::Avx2 : detected_tier();
  }();
  return tier;
}

// Whether oneDNN's s8 x s8 matmul sums exactly in int32 at the ISA it runs. Without VNNI its int8
// kernels multiply with vpmaddubsw, whose pairs of u8 x s8 products saturate at int16 (oneDNN's
// "Nuances of int8 Computations"): under NMKIT_ISA=avx2 (oneDNN capped to AVX2) seven INT8 tests
// failed (LinearInt8.DenseBitExact: Y[0,3] -22.86 against -30.92) and SmolLM2's int8 perplexity
// read 32.83 instead of 30.66, as it would on any AVX2-only or pre-VNNI AVX-512 machine. AVX-512
// VNNI (vpdpbusd) and AMX sum in int32. oneDNN's AVX2 VNNI is left out: no machine here has it to
// prove it exact.
bool onednn_int8_exact() {
  onednn_tier();  // any cap first: asking oneDNN its ISA fixes it
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
  return (isa & vnni) == vnni;
}

bool onednn_runs(MatmulType type) {
  static const std::array<bool, 3> runs = [] {
    std::array<bool, 3> out{};
    for (MatmulType t : {MatmulType::F32, MatmulType::Bf16, MatmulType::Int8}) {
      try {
        describe(t, 64, 64, 64, 64, dnnl::memory::desc({64, 64}, weight_type(t), tag::any));
        out[static_cast<size_t>(t)] = t != MatmulType::Int8 || onednn_int8_exact();
      } catch (const std::exception&) {
        out[static_cast<size_t>(t)] = false;  // no implementation on this CPU
      }
    }
    return out;
  }();
  return runs[static_cast<size_t>(type)];
}

namespace {

struct GemmKey {
  MatmulType type;
  int64_t M, n, K, ldx, ldw;
  int threads;
  auto tie() const { return std::tie(type, M, n, K, ldx, ldw, threads); }
  bool operator<(const GemmKey& other) const { return tie() < other.tie(); }
};

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, dst, scratchpad;
};

// A layer sees a handful of token counts, and the panels of a call one or two row counts; a caller
// of many distinct shapes is bounded by clearing the cache when it fills.
Prepared prepared(const GemmKey& key) {
  static std::mutex mutex;
  static std::map<GemmKey, Prepared> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 256) cache.clear();
  // The user's W [n, K] with row stride ldw is the K x n matrix B with strides (1, ldw).
  const dnnl::memory::desc weights({key.K, key.n}, weight_type(key.type), dnnl::memory::dims{1, key.ldw});
  const auto pd = describe(key.type, key.M, key.n, key.K, key.ldx, weights);
  return cache.emplace(key, Prepared{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()})
      .first->second;
}

}  // namespace

Status onednn_gemm(MatmulType type, const void* x, int64_t M, int64_t ldx, const void* w, int64_t n, int64_t K,
                   int64_t ldw, void* y, int threads) {
  try {
    const ThreadCountForCall count(threads);
    const Prepared p = prepared(GemmKey{type, M, n, K, ldx, ldw, threads});
    thread_local dnnl::stream stream(engine());
    dnnl::memory src(p.src, engine(), const_cast<void*>(x));
    dnnl::memory weights(p.weights, engine(), const_cast<void*>(w));
    dnnl::memory dst(p.dst, engine(), y);
    // This thread's scratchpad (see describe), grown to the largest a call has needed; 64-byte aligned.
    thread_local std::vector<std::byte> scratch;
    const size_t bytes = p.scratchpad.get_size();
    if (scratch.size() < bytes + 64) scratch.resize(bytes + 64);
    void* aligned = scratch.data();
    size_t space = scratch.size();
    std::align(64, bytes, aligned, space);
    dnnl::memory scratchpad(p.scratchpad, engine(), aligned);
    p.primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                 {DNNL_ARG_WEIGHTS, weights},
                                 {DNNL_ARG_DST, dst},
                                 {DNNL_ARG_SCRATCHPAD, scratchpad}});
    stream.wait();
    return ok_status();
  } catch (const std::exception& e) {
    return onednn_error("matmul failed", e);
  }
}

}  // namespace nmkit::linear
