#!/usr/bin/env bash
# Writes tests/data/quant_mix_reference.json: for small create-model files (a dense llama of 16
# layers, and the tiny qwen3moe, glm4moe and deepseek2), the size and the tensor types of the
# file llama-quantize 2026-09 writes for each mix (no importance matrix), and for the dense model
# the mixes that need one with an importance matrix of autoglm imatrix (keys ending in
# " imatrix"). test_quant_mix holds autoglm quantize to them: the same types, sizes within 1%.
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
imatrix_mixes="IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ1_S IQ1_M Q2_K_S"
echo "{" >"$tmp/out.json"
first=1
# entry MODEL MIX [IMATRIX]: one line of the reference, if llama-quantize writes the mix.
entry() {
  local key="$1 $2" args=()
  if [ -n "${3:-}" ]; then args=(--imatrix "$3"); key="$key imatrix"; fi
  "$lq/llama-quantize" "${args[@]}" "$tmp/$1.gguf" "$tmp/q.gguf" "$2" 2 >/dev/null 2>&1 || return 0
  size=$(stat -c %s "$tmp/q.gguf")
  types=$("$bin" info -m "$tmp/q.gguf" 2>/dev/null | sed -n 's/^weight types: *//p')
  [ $first -eq 1 ] || echo "," >>"$tmp/out.json"
  first=0
  printf '  "%s": {"bytes": %s, "types": "%s"}' "$key" "$size" "$types" >>"$tmp/out.json"
}
for m in llama16 qwen3moe glm4moe deepseek2; do
  # shellcheck disable=SC2086
  "$bin" create-model ${models[$m]} --preset tiny --type f32 -o "$tmp/$m.gguf" >/dev/null
  for mix in $mixes; do entry "$m" "$mix"; done
done
"$bin" imatrix -m "$tmp/llama16.gguf" -f tests/data/stories_ppl.txt -o "$tmp/llama16.imatrix.gguf" -c 128 --chunks 2 \
  >/dev/null 2>&1
for mix in $imatrix_mixes; do entry llama16 "$mix" "$tmp/llama16.imatrix.gguf"; done
printf '\n}\n' >>"$tmp/out.json"
cp "$tmp/out.json" tests/data/quant_mix_reference.json
echo "wrote tests/data/quant_mix_reference.json ($(grep -c bytes tests/data/quant_mix_reference.json) files)"
