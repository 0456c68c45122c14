#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, kernels, golden, sanitizer, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The end-to-end tests use the official openai npm client, pinned in tests/e2e/package-lock.json.
if command -v npm >/dev/null; then (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error); fi
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)"
