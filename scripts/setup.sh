#!/usr/bin/env bash
# Installs everything cachet needs to build and test, from Debian packages. Idempotent.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
      libsentencepiece-dev sentencepiece
      clang libclang-rt-14-dev
      python3 python3-numpy python3-torch python3-sentencepiece python3-regex
      chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node.js and npm for the HTTP client tests (any recent Node works; Debian's if none is there).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi

# The node packages of the HTTP client tests (tests/server), pinned by package-lock.json.
if [ -f "$(dirname "$0")/setup-server-tests.sh" ]; then
  bash "$(dirname "$0")/setup-server-tests.sh"
fi
