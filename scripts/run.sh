#!/usr/bin/env bash
# Installs what is needed, builds, and generates text with the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"${JOBS:-2}" --target cachet_cli
./build/cachet run -p "${1:-ROMEO:}" -n "${2:-200}"
