#!/usr/bin/env bash
# The main job: builds, then serves the OpenAI-compatible API on 127.0.0.1:8080 with
# config/default.yaml. Model: the first argument if given, else the bundled default:
# ../shared/models/stories260K.gguf when present, else a random tiny model made by create-model.
# More flags after the model go to `autoglm serve` (e.g. --port 9000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
bin=build/src/cli/autoglm
model=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$model" ]; then
  model=../shared/models/stories260K.gguf
  if [ -f "$model" ]; then
    echo "model: $model (trained stories260K from ../shared)" >&2
  else
    model=build/tiny-random.gguf
    [ -f "$model" ] || "$bin" create-model --arch llama --preset tiny --type f16 --seed 1 -o "$model" >/dev/null
    echo "model: $model (../shared absent: a random-weight tiny model from create-model; its text is gibberish)" >&2
  fi
fi
exec "$bin" serve --config config/default.yaml -m "$model" "$@"
