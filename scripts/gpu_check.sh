#!/usr/bin/env bash
# The one GPU script of issue 27 (docs/design.md section 14), for a lent GPU machine: builds the GPU
# path with every core, then runs, each step timed and logged to one file:
#   1. the host oracles and CudaSparseLinear's device tests (tests/cuda): INT8 2:4 and dense equal
#      to the CPU bit for bit, slid 6:8 through lifting equal to dense 6:8 INT8, E4M3 within its
#      derived bound, the non-finite activation error; none may be skipped here;
#   2. the SASS checks on the objects built there (sparse MMA present, no local memory);
#   3. compute-sanitizer memcheck on the small device cases;
#   4. the timings (bench/cuda/cuda_linear_bench.cc): cuBLASLt dense vs CUTLASS and cuSPARSELt on 2:4
#      and slid 6:8 for N = K = 4096, 8192 and M = 16 ... 8192, INT8 and E4M3; quantize + lift vs
#      plain quantization.
#
# The machine has no network: what it lacks travels with the working tree. Prepare here (make test
# does it: scripts/setup.sh runs scripts/setup_cuda.sh), then call the device tool from the checkout
# that holds this branch:
#   command: bash scripts/gpu_check.sh
#   carry:   [".cache/cuda/cutlass", ".cache/cuda/cusparselt/include", ".cache/cuda/googletest"]
#   timeout_s: 420
# (about 33 MiB carried.) Expected: build about 1 minute, steps 1-4 about 2-3 minutes; each step has
# its own time limit, so a hang costs that step, not the call. The log is $OUT/gpu_check.log
# (build-gpu/gpu_check.log without $OUT), the device tests' whole output $OUT/device_tests.log;
# the last lines printed are the summary. cuSPARSELt's library is the one in the image's Python
# packages (nvidia-cusparselt-cu13), or NMKIT_CUSPARSELT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu}
mkdir -p "$out"
log=$out/gpu_check.log
exec > >(tee "$log") 2>&1
deps=$PWD/.cache/cuda
build=build-gpu
summary=()
failed=0
step() { echo; echo "== $1 ($(date -u +%T))"; }
record() {  # record NAME STATUS SECONDS
  if [ "$2" -eq 0 ]; then summary+=("ok    $1 ($3 s)"); else summary+=("FAIL  $1 (exit $2, $3 s)"); failed=1; fi
}
timed() {  # timed NAME LIMIT_S COMMAND...: runs, records, never stops the script
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  timeout "$limit" "$@"
  rc=$?
  record "$name" "$rc" $((SECONDS - start))
  return "$rc"
}
finish() {
  echo
  echo "== summary ($(date -u +%T), log $log)"
  printf '%s\n' "${summary[@]}"
  exit "$failed"
}

step "device"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv || true
nvcc --version | tail -n 1
cmake --version | head -n 1
echo "cores: $(nproc)"
for f in cutlass/include/cutlass/cutlass.h cusparselt/include/cusparseLt.h googletest/CMakeLists.txt; do
  if [ ! -f "$deps/$f" ]; then
    echo "missing $deps/$f: carry .cache/cuda/cutlass, .cache/cuda/cusparselt/include and .cache/cuda/googletest"
    record "dependencies carried" 1 0
    finish
  fi
done

if [ -z "${NMKIT_CUSPARSELT:-}" ]; then
  places=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  NMKIT_CUSPARSELT=$(find $places /opt /usr/local /usr/lib -name 'libcusparseLt.so.0' 2>/dev/null | head -n 1)
fi
export NMKIT_CUSPARSELT
echo "cuSPARSELt: ${NMKIT_CUSPARSELT:-not found (its tests fail, its timings are left out)}"

step "build (cmake, $(nproc) jobs)"
generator=()  # Ninja where it is there, unless a build folder already chose
[ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null && generator=(-G Ninja)
start=$SECONDS
cmake -S tests/cuda/gpu_check -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DNMKIT_CUDA_DEPS="$deps" -DGTEST_SOURCE="$deps/googletest" >"$out/configure.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" 2>&1 | grep -v '^\[' | grep -iv 'advisory' | tail -n 40
rc=${PIPESTATUS[0]}
[ -f "$build/tests_cuda/nmkit_test_cuda" ] || rc=1
[ "$rc" -ne 0 ] && cat "$out/configure.log" | tail -n 30
record "build" "$rc" $((SECONDS - start))
[ "$rc" -ne 0 ] && finish
tests=$build/tests_cuda

step "1. host oracles and device tests"
timed "CUTLASS metadata oracle" 120 "$tests/nmkit_test_cuda_oracle" --gtest_brief=1
start=$SECONDS
timeout 240 "$tests/nmkit_test_cuda" 2>&1 | tee "$out/device_tests.log" | grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error|Expected|Which is|element|row|PASSED|FAILED TEST'
rc=${PIPESTATUS[0]}
if grep -q '^\[  SKIPPED \]' "$out/device_tests.log"; then
  echo "a device test was skipped on a GPU machine"
  rc=1
fi
record "device tests (INT8 exact, slid 6:8 exact, E4M3 bound, errors)" "$rc" $((SECONDS - start))

step "2. SASS checks"
timed "SASS: sparse MMA, no local memory" 60 bash tests/cuda/sass_check.sh "$(command -v cuobjdump)" \
  "$build"/cuda/CMakeFiles/nmkit_cuda.dir/*.cu.o

step "3. compute-sanitizer memcheck"
timed "memcheck (dense, 2:4 and slid cases)" 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$tests/nmkit_test_cuda" --gtest_filter='CudaLinear.Int8Dense*:CudaLinear.Slid68*:CudaLinear.NonFinite*' --gtest_brief=1

step "4. timings"
timed "timings" 180 "$tests/nmkit_cuda_bench"

finish
