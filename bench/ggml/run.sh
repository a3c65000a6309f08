#!/usr/bin/env bash
# cachet and ggml side by side on the same matrix-vector work, in one run:
#   bench/ggml/run.sh GGML_SOURCE_DIR [THREADS] [CACHET_BINARY]
# GGML_SOURCE_DIR is a checkout of ggml (github.com/ggml-org/ggml) that you provide; it is
# built there (in build-cachet/, CPU backend, -march=native) the first time. Each weight type
# and shape is measured by cachet (`cachet bench kernels`) and by ggml (bench/ggml/ggml_matvec.c,
# weights in the buffer type llama.cpp would choose), over 1 GiB of copies of the matrix so
# that both stream the weights from memory. Figures are GB/s of weight bytes.
set -euo pipefail
ggml=${1:?usage: bench/ggml/run.sh GGML_SOURCE_DIR [THREADS] [CACHET_BINARY]}
threads=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
cachet=${3:-$here/../../build/cachet}
[ -x "$cachet" ] || { echo "run.sh: no cachet binary at $cachet (build cachet first)" >&2; exit 2; }
build=$ggml/build-cachet
if [ ! -e "$build/src/libggml.so" ]; then
  mkdir -p "$build"
  if ! { cmake -S "$ggml" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
           -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF &&
         cmake --build "$build" -j "$(nproc)"; } >"$build/build.log" 2>&1; then
    tail -20 "$build/build.log" >&2
    echo "run.sh: building ggml failed (log: $build/build.log)" >&2
    exit 1
  fi
fi
cc -O2 -o "$build/ggml_matvec" "$here/ggml_matvec.c" -I"$ggml/include" -L"$build/src" \
  -lggml -lggml-cpu -lggml-base -Wl,-rpath,"$build/src"
# TYPES (environment) picks the weight types, cachet's names: Q4_K Q6_K Q8_0 BF16 by default.
for type in ${TYPES:-Q4_K Q6_K Q8_0 BF16}; do
  gtype=$(echo "$type" | sed 's/^Q/q/; s/^BF16$/bf16/; s/^F16$/f16/; s/^F32$/f32/')
  "$cachet" bench kernels --quick -t "$threads" --types "$type" 2>&1 | grep -E '^(bandwidth|matvec)'
  for shape in "2560 7680" "7680 2560" "4096 14336"; do
    # shellcheck disable=SC2086
    "$build/ggml_matvec" "$gtype" $shape "$threads" 2>&1 | grep -v 'repack tensor'
  done
done
