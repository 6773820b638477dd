#!/usr/bin/env bash
# Sanitizer jobs of CI (issue 13): the library's test binaries built with AddressSanitizer +
# UndefinedBehaviorSanitizer and run on the scalar tier (NMKIT_ISA=scalar; the per-ISA kernel
# suites run on every tier in `make test`), then ThreadSanitizer over the code that runs on the
# thread pool (parallel_for: pruning, compression and compliance scans, slide/lift, the linear and
# quantization kernels, the pool itself). Each in its own build directory (build-asan, build-tsan),
# building only these test binaries: the CLI (with its benchmark baselines) and the model runtime
# are left to `make test`, to keep the job within CI's time.
#   scripts/sanitize.sh [asan] [tsan]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex) under -fsanitize=address;
# it stays a warning there, every other warning is still an error.
# -g1: line tables only, all a report's file:line needs, and faster to compile than full -g
# (docs/data.md "CI time").
common="-O1 -g1 -fno-omit-frame-pointer -Wno-error=maybe-uninitialized"

configure() {  # dir, sanitizer flags, extra cmake arguments...
  local dir=$1 flags=$2; shift 2
  # Ninja builds the job's test binaries side by side; CMake's Makefiles build the targets named on
  # one command line one after another (.NOTPARALLEL), each a batch or two, so one core sat idle.
  # A folder configured with Makefiles before keeps them (CMake cannot switch a folder's generator).
  local generator=()
  if command -v ninja >/dev/null && { [ ! -f "$dir/CMakeCache.txt" ] ||
                                      grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; }; then
    generator=(-G Ninja)
  fi
  # No GPU path: its tests are host oracles that make test runs, and enabling CUDA costs nvcc's checks.
  # Unity build of the library modules and the test files (a few test files stay apart,
  # tests/CMakeLists.txt): the instrumented headers are compiled once per batch of files instead of
  # once per file.
  cmake "${generator[@]}" -S . -B "$dir" -DCMAKE_BUILD_TYPE=None -DCMAKE_UNITY_BUILD=ON "${launcher[@]}" \
        -DCMAKE_CXX_FLAGS="$common $flags" \
        -DCMAKE_EXE_LINKER_FLAGS="$flags" -DNMKIT_CUDA=OFF "$@" >/dev/null
}

run_tests() {  # dir, gtest filter, test names...
  local dir=$1 filter=$2; shift 2
  for t in "$@"; do
    echo "sanitize: $dir: $t"
    "$dir/tests/nmkit_test_$t" --gtest_brief=1 --gtest_filter="$filter" | tail -n 3
  done
}

run_asan() {
  local t0=$SECONDS
  # The tokenizer runs under ASan+UBSan in the fuzz job (fuzz_tokenizer); its unit tests here would
  # build the whole model module with ASan, the largest part of this job's build.
  local tests=(core format prune slide io gguf ref quant linear)
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=all"
  cmake --build build-asan -j "$jobs" --target "${tests[@]/#/nmkit_test_}"
  echo "sanitize: ASan+UBSan build took $((SECONDS - t0)) s"
  t0=$SECONDS
  NMKIT_ISA=scalar ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_tests build-asan '*' "${tests[@]}"
  echo "sanitize: ASan+UBSan tests took $((SECONDS - t0)) s"
}

run_tsan() {
  local t0=$SECONDS
  local tests=(core format prune slide quant linear)
  # parallel_for on nmkit's std::thread pool: TSan cannot see libgomp's (uninstrumented) barriers,
  # so the OpenMP team of the default build would only give false reports. The chunks each thread
  # runs are the same under both pools (src/core/threads.cc), which is what this job checks.
  configure build-tsan "-fsanitize=thread" -DNMKIT_OPENMP_POOL=OFF
  cmake --build build-tsan -j "$jobs" --target "${tests[@]/#/nmkit_test_}"
  echo "sanitize: TSan build took $((SECONDS - t0)) s"
  t0=$SECONDS
  # Four pool threads whatever the machine, so the workers really run concurrently. The exhaustive
  # enumerations (every subset of every group) check single-threaded logic that make test and the
  # ASan job already run; under TSan, ExhaustiveNm took 137 s of the format suite's 145 s, and the
  # parameterized Methods/ExhaustiveSelection.* (which a leading 'Exhaustive*' did not match) 190 s
  # of the prune suite's 192 s. LinearRecords checks the record layouts and runs every form through
  # the same threaded kernels the Linear* suites run here (14 s of the linear suite's 84 under TSan).
  NMKIT_ISA=scalar NMKIT_THREADS=4 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    run_tests build-tsan '-*Exhaustive*:LinearRecords.*' "${tests[@]}"
  echo "sanitize: TSan tests took $((SECONDS - t0)) s"
}

for job in "${@:-asan tsan}"; do
  for j in $job; do "run_$j"; done
done
