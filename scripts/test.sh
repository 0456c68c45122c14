#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, kernels, golden, sanitizer, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)"
