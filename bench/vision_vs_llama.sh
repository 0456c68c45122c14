#!/usr/bin/env bash
# The vision tower side by side with llama.cpp 2026-09's llama-mtmd-cli: one image through
# GLM-4.1V-9B's tower shape (create-model --arch glm4v --preset 9b: 24 layers of 1536, the
# merger to 4096; the text model cut to one layer, which the encode time does not involve),
# 2 threads, on a screenshot-like picture; by default the issue's case, a phone's 1080x2400 at
# Q4_K (about 15 minutes on two Zen 5 cores, llama.cpp's part most of it). Prints each tool's
# encode time, and autoglm's on the AVX2 kernel set.
# Usage: bash bench/vision_vs_llama.sh [WIDTHxHEIGHT [TYPE]]   (needs build/ and the anchor built
# with the llama-mtmd-cli target: see ../shared/tools/build-llama-anchor.sh)
set -euo pipefail
size=${1:-1080x2400}
type=${2:-q4_k}
bin=${AUTOGLM_BIN:-build/src/cli/autoglm}
anchor=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
dir=${BENCH_DIR:-/tmp/vision-bench}
mkdir -p "$dir"
model=$dir/glm4v-9b-L1-$type.gguf
[ -f "$model" ] || "$bin" create-model --arch glm4v --preset 9b --n-layer 1 --type "$type" -o "$model"
w=${size%x*} h=${size#*x}
/usr/bin/python3 "$(dirname "$0")/screenshot.py" "$dir/screen.png" "$w" "$h"
lscpu | grep "Model name"
"$bin" bench -m "$model" --mmproj "${model%.gguf}.mmproj.gguf" --image-size "$size" -p 0 -n 0 -r 1 -t 2 | grep image
AUTOGLM_CPU_ISA=avx2 "$bin" bench -m "$model" --mmproj "${model%.gguf}.mmproj.gguf" --image-size "$size" -p 0 -n 0 \
  -r 1 -t 2 | sed 's/^/avx2 kernels: /' | grep image
"$anchor/llama-mtmd-cli" -m "$model" --mmproj "${model%.gguf}.mmproj.gguf" --image "$dir/screen.png" \
  -p "What is on the screen?" -n 1 -t 2 --temp 0 2>&1 | grep -E "encoding done" | sed 's/^/llama-mtmd-cli: /'
