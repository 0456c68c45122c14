#!/usr/bin/env bash
# Configures and builds (Release, Ninja) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# CI builds with warnings as errors.
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOGLM_WERROR=$werror >/dev/null
cmake --build build -j "$(nproc)"
