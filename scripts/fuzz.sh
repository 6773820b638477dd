#!/usr/bin/env bash
# Fuzz jobs of CI (issue 13): builds the libFuzzer targets of tests/fuzz with clang
# (-fsanitize=fuzzer,address,undefined) in build-fuzz, replays every seed and regression input of
# each target once, then fuzzes each target for FUZZ_SECONDS (default 30) from those corpora.
# New inputs go to a scratch directory, never into the repository; a crash, sanitizer report, leak,
# input slower than 10 s or above 2 GB of memory fails the job, and libFuzzer writes the reproducer
# to build-fuzz/artifacts/ (add it to tests/fuzz/corpus/<target>/regression once fixed).
#   scripts/fuzz.sh [TARGET...]   (default: every tests/fuzz/fuzz_*.cc)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
jobs=${JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
t0=$SECONDS
cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j "$jobs"
echo "fuzz: build took $((SECONDS - t0)) s"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cc; do targets+=("$(basename "$f" .cc)"); done
fi
mkdir -p build-fuzz/artifacts
options=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix=build-fuzz/artifacts/)
for t in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$t
  # Replay: every committed input once (libFuzzer exits non-zero on the first failing one).
  build-fuzz/"$t" "${options[@]}" -runs=0 "$corpus"/seed "$corpus"/regression 2>&1 | tail -n 1
  scratch=$(mktemp -d)
  build-fuzz/"$t" "${options[@]}" -max_total_time="$seconds" -max_len=16384 -print_final_stats=1 \
    "$scratch" "$corpus"/seed "$corpus"/regression 2> build-fuzz/"$t".log || {
    tail -n 40 build-fuzz/"$t".log; rm -rf "$scratch"; exit 1; }
  rm -rf "$scratch"
  echo "fuzz: $t: $(grep -m1 'stat::number_of_executed_units' build-fuzz/"$t".log | awk '{print $2}') executions in ${seconds} s, no failure"
done
