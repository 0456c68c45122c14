#!/usr/bin/env bash
# Writes tests/data/quant_mix_reference.json: for small create-model files (a dense llama of 16
# layers, and the tiny qwen3moe, glm4moe and deepseek2), the size and the tensor types of the
# file llama-quantize 2026-09 writes for each mix (no importance matrix). test_quant_mix holds
# autoglm quantize to them: the same types, sizes within 1%.
#   bash bench/quant_mix_reference.sh      # needs ../shared/tools/build-llama-anchor.sh + llama-quantize
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/src/cli/autoglm
lq=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
export LD_LIBRARY_PATH=$lq
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mixes="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4_MOE"
declare -A models=([llama16]="--arch llama --n-layer 16" [qwen3moe]="--arch qwen3moe" [glm4moe]="--arch glm4moe"
                   [deepseek2]="--arch deepseek2")
echo "{" >"$tmp/out.json"
first=1
for m in llama16 qwen3moe glm4moe deepseek2; do
  # shellcheck disable=SC2086
  "$bin" create-model ${models[$m]} --preset tiny --type f32 -o "$tmp/$m.gguf" >/dev/null
  for mix in $mixes; do
    "$lq/llama-quantize" "$tmp/$m.gguf" "$tmp/q.gguf" "$mix" 2 >/dev/null 2>&1 || continue
    size=$(stat -c %s "$tmp/q.gguf")
    types=$("$bin" info -m "$tmp/q.gguf" 2>/dev/null | sed -n 's/^weight types: *//p')
    [ $first -eq 1 ] || echo "," >>"$tmp/out.json"
    first=0
    printf '  "%s %s": {"bytes": %s, "types": "%s"}' "$m" "$mix" "$size" "$types" >>"$tmp/out.json"
  done
done
printf '\n}\n' >>"$tmp/out.json"
cp "$tmp/out.json" tests/data/quant_mix_reference.json
echo "wrote tests/data/quant_mix_reference.json ($(grep -c bytes tests/data/quant_mix_reference.json) files)"
