#!/usr/bin/env bash
# Sanitizer jobs of CI (issue 13): the test suite built with AddressSanitizer + UndefinedBehavior-
# Sanitizer and run on the scalar tier (NMKIT_ISA=scalar: the per-ISA kernel suites are covered by
# `make test`), then ThreadSanitizer over the code that runs on the thread pool (parallel_for users:
# pruning, compression and compliance scans, slide/lift, the linear and quantization kernels).
# Each in its own build directory (build-asan, build-tsan), building only the test targets.
#   scripts/sanitize.sh [asan|tsan]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex) under -fsanitize=address;
# it stays a warning there, every other warning is still an error.
common="-O1 -g -fno-omit-frame-pointer -Wno-error=maybe-uninitialized"

configure() {  # dir, sanitizer flags
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=None "${launcher[@]}" -DCMAKE_CXX_FLAGS="$common $2" \
        -DCMAKE_EXE_LINKER_FLAGS="$2" >/dev/null
}

run_asan() {
  local t0=$SECONDS
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=all"
  cmake --build build-asan -j "$jobs" --target nmkit_test_core nmkit_test_format nmkit_test_prune \
        nmkit_test_slide nmkit_test_io nmkit_test_ref nmkit_test_quant nmkit_test_linear nmkit_test_cli \
        nmkit_cli nmkit_api_example
  echo "sanitize: ASan+UBSan build took $((SECONDS - t0)) s"
  t0=$SECONDS
  # The per-tier copies of the kernel suites run once, on the scalar tier; the benchmark smoke test
  # times kernels and is left to `make test`.
  (cd build-asan && NMKIT_ISA=scalar \
     ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j "$jobs" -E '\.(avx2|avx512)$|^bench_smoke$')
  echo "sanitize: ASan+UBSan tests took $((SECONDS - t0)) s"
}

run_tsan() {
  local t0=$SECONDS
  configure build-tsan "-fsanitize=thread"
  cmake --build build-tsan -j "$jobs" --target nmkit_test_core nmkit_test_format nmkit_test_prune \
        nmkit_test_slide nmkit_test_quant nmkit_test_linear
  echo "sanitize: TSan build took $((SECONDS - t0)) s"
  t0=$SECONDS
  # Two threads at least, so the pool really runs concurrently on any machine.
  (cd build-tsan && NMKIT_THREADS=4 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
     ctest --output-on-failure -j "$jobs" \
       -R '^(Threads|Prune|Selection|Compliance|Format|Validate|Exhaustive|Slide|Lift|Quantize|Linear)' \
       -E '\.(avx2|avx512)$')
  echo "sanitize: TSan tests took $((SECONDS - t0)) s"
}

for job in "${@:-asan tsan}"; do
  for j in $job; do "run_$j"; done
done
