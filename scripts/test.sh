#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite: sanitizer build of the unit
# tests, a short libFuzzer run of every parser, then every CTest test (unit + PyTorch reference).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=${JOBS:-2}

echo "== sanitizers (AddressSanitizer + UndefinedBehaviorSanitizer): unit tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCACHET_SANITIZE=ON \
  -DCACHET_BENCH=OFF > build-asan.log
cmake --build build-asan -j"$JOBS" --target cachet_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/tests/cachet_tests --gtest_brief=1 --gtest_filter="${ASAN_FILTER:-*}"

echo "== fuzzing the parsers (libFuzzer)"
CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCACHET_FUZZ=ON \
  -DCACHET_TESTS=OFF -DCACHET_BENCH=OFF > build-fuzz.log
cmake --build build-fuzz -j"$JOBS" --target fuzzers
for f in build-fuzz/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  mkdir -p "build-fuzz/corpus/$name"
  seeds=()
  [ -d "fuzz/seeds/$name" ] && seeds=("fuzz/seeds/$name")
  "$f" -max_total_time="${FUZZ_SECONDS:-30}" -rss_limit_mb=2048 -timeout=10 \
    "build-fuzz/corpus/$name" "${seeds[@]}" 2>&1 | tail -n 3
done

echo "== release build and the whole suite"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > build.log
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"
