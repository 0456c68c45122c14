#!/usr/bin/env bash
# Mixture-of-experts decode and prefill, side by side with llama.cpp 2026-09 in one run, on
# the same GGUF files (create-model --arch qwen3moe --preset 30b-a3b --n-layer 12 --type T).
# Usage: bench/moe_vs_llama.sh OUT_DIR MODEL.gguf...   (env: THREADS=2, ISAS="avx512vnni avx2", REPS=2)
# Builds nothing: ./build/src/cli/autoglm and the anchor's llama-bench / llama-batched-bench
# (bash ../shared/tools/build-llama-anchor.sh, plus --target llama-batched-bench) must exist.
# LLAMA_AVX2_BIN: a second llama.cpp build limited to AVX2 (as in weight_types_vs_llama.sh), run beside
# the native one, so that our AVX2 set also has a like-for-like comparison.
set -euo pipefail
out=${1:?OUT_DIR}
shift
threads=${THREADS:-2}
reps=${REPS:-2}
isas=${ISAS:-"avx512vnni avx2"}
llama_bin=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
autoglm=${AUTOGLM:-./build/src/cli/autoglm}
mkdir -p "$out"
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*avx512/Flags: ... avx512/' | cut -c1-200 >"$out/cpu.txt"
for model in "$@"; do
  name=$(basename "$model" .gguf)
  "$autoglm" info -m "$model" >"$out/$name.info.txt" 2>&1 || true
  for isa in $isas; do
    echo "== $name ours $isa"
    AUTOGLM_CPU_ISA=$isa "$autoglm" bench -m "$model" -p 512 -n 128 -r "$reps" -t "$threads" \
      >"$out/$name.ours.$isa.txt" 2>&1
    AUTOGLM_CPU_ISA=$isa "$autoglm" bench -m "$model" -p 0 -n 128 -b 16 --parallel-prompt 128 -r 1 -t "$threads" \
      >"$out/$name.ours.$isa.b16.txt" 2>&1
  done
  for lb in "$llama_bin" ${LLAMA_AVX2_BIN:+"$LLAMA_AVX2_BIN"}; do
    tag=llama
    [ "$lb" = "$llama_bin" ] || tag=llama-avx2
    echo "== $name $tag"
    LD_LIBRARY_PATH=$lb "$lb/llama-bench" -m "$model" -p 512 -n 128 -r "$reps" -t "$threads" >"$out/$name.$tag.txt" 2>&1
    LD_LIBRARY_PATH=$lb "$lb/llama-batched-bench" -m "$model" -npp 128 -ntg 128 -npl 16 -c 4096 \
      -t "$threads" >"$out/$name.$tag.b16.txt" 2>&1
  done
done
grep -H -E "pp512|tg128|decode bound|before each repetition" "$out"/*.ours.*.txt "$out"/*.llama*.txt | cut -c1-240
grep -H -A3 "S_TG" "$out"/*.llama*.b16.txt | cut -c1-220
