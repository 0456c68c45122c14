#!/usr/bin/env bash
# The main job: builds, then serves the OpenAI-compatible API on 127.0.0.1:8080 with
# config/default.yaml. Model: the first argument if given, else the bundled default
# (scripts/default-model.sh). Flags after the model go to `autoglm serve` (e.g. --port 9000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
model=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then  # a first argument that is not a flag is the model
  model=$1
  shift
fi
[ -n "$model" ] || model=$(bash scripts/default-model.sh)
exec build/src/cli/autoglm serve --config config/default.yaml -m "$model" "$@"
