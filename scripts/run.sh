#!/usr/bin/env bash
# Builds, then generates text on the command line with the bundled default model
# (scripts/default-model.sh). Arguments go to `autoglm run` (e.g. -p "Once upon a time" -n 64 --temp 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
model=$(bash scripts/default-model.sh)
if [ $# -eq 0 ]; then set -- -p "Once upon a time" -n 64; fi
exec build/src/cli/autoglm run -m "$model" "$@"
