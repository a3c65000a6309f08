#!/usr/bin/env bash
# Installs the node packages of the HTTP client tests (tests/server: the openai client and
# playwright-core) from the npm registry, exactly as pinned by package-lock.json. Idempotent:
# does nothing when node_modules already holds every locked package at its locked version.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/server"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "setup-server-tests: node and npm are needed (scripts/setup.sh installs them)" >&2
  exit 1
fi
cd "$dir"
if node -e '
  const lock = require("./package-lock.json");
  for (const [path, entry] of Object.entries(lock.packages || {})) {
    if (!path) continue;
    const installed = require("./" + path + "/package.json");
    if (installed.version !== entry.version) process.exit(1);
  }' 2>/dev/null; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
