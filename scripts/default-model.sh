#!/usr/bin/env bash
# Prints the bundled default model's path (after build.sh): ../shared/models/stories260K.gguf when
# present, else a random-weight tiny model written by create-model. Says which on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
model=../shared/models/stories260K.gguf
if [ -f "$model" ]; then
  echo "model: $model (trained stories260K from ../shared)" >&2
else
  model=build/tiny-random.gguf
  [ -f "$model" ] || build/src/cli/autoglm create-model --arch llama --preset tiny --type f16 --seed 1 -o "$model" >/dev/null
  echo "model: $model (../shared absent: a random-weight tiny model from create-model; its text is gibberish)" >&2
fi
echo "$model"
