#!/usr/bin/env bash
# The main job: builds, then generates text with the bundled tiny model:
# ../shared/models/stories260K.gguf when present, else a random tiny model made by create-model.
# Extra arguments go to `autoglm run` (e.g. -p "Once upon a time" -n 64 --temp 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
bin=build/src/cli/autoglm
model=../shared/models/stories260K.gguf
if [ -f "$model" ]; then
  echo "model: $model (trained stories260K from ../shared)" >&2
else
  model=build/tiny-random.gguf
  [ -f "$model" ] || "$bin" create-model --arch llama --preset tiny --type f16 --seed 1 -o "$model" >/dev/null
  echo "model: $model (../shared absent: a random-weight tiny model from create-model; its text is gibberish)" >&2
fi
if [ $# -eq 0 ]; then set -- -p "Once upon a time" -n 64; fi
exec "$bin" run -m "$model" "$@"
