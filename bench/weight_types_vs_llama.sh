#!/usr/bin/env bash
# Decode and prefill speed per weight type beside llama.cpp 2026-09, in one run on one machine:
# the 1b preset (create-model --arch llama --preset 1b, F16) quantized by llama-quantize --pure to
# each type, then llama-bench and autoglm bench (both kernel sets: the CPU's best, and AVX2) on
# that same file, 2 threads, pp512 and tg128.
#   bash bench/weight_types_vs_llama.sh [TYPES...]      # default: Q4_0 IQ4_NL IQ4_XS
# The lattice types need an importance matrix for llama-quantize, and ggml's encoders one for every
# tensor they write: QUANT_ARGS="--imatrix FILE --token-embedding-type q4_k --output-tensor-type q6_k"
# (FILE from autoglm imatrix on the F16 model; the same args for every type of the run).
# Needs ../shared/tools/build-llama-anchor.sh with the llama-quantize and llama-bench targets.
# LLAMA_AVX2_BIN: a second llama.cpp build limited to AVX2 (cmake -DGGML_NATIVE=OFF -DGGML_AVX=ON
# -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON), measured beside our AVX2 set.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build/src/cli/autoglm
lq=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
work=${WORK:-/tmp/autoglm-types-bench}
threads=${THREADS:-2}
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(Q4_0 IQ4_NL IQ4_XS)
mkdir -p "$work"
[ -f "$work/f16.gguf" ] || "$bin" create-model --arch llama --preset 1b --type f16 -o "$work/f16.gguf" >/dev/null
grep -m1 'model name' /proc/cpuinfo
printf '| type | tool | pp512 t/s | tg128 t/s |\n|---|---|---:|---:|\n'
for t in "${types[@]}"; do
  f="$work/llama-$t.gguf"
  # shellcheck disable=SC2086
  [ -f "$f" ] || LD_LIBRARY_PATH=$lq "$lq/llama-quantize" --pure ${QUANT_ARGS:-} "$work/f16.gguf" "$f" "$t" "$threads" \
    >/dev/null 2>&1
  for lb in "$lq" ${LLAMA_AVX2_BIN:+"$LLAMA_AVX2_BIN"}; do
    read -r lpp ltg < <(LD_LIBRARY_PATH=$lb "$lb/llama-bench" -m "$f" -p 512 -n 128 -t "$threads" -r 3 -o json 2>/dev/null |
      python3 -c 'import json, sys
rows = json.load(sys.stdin)
pick = lambda p, g: next(r["avg_ts"] for r in rows if r["n_prompt"] == p and r["n_gen"] == g)
print("%.2f %.2f" % (pick(512, 0), pick(0, 128)))')
    label=llama.cpp
    [ "$lb" = "$lq" ] || label="llama.cpp (avx2)"
    printf '| %s | %s | %s | %s |\n' "$t" "$label" "$lpp" "$ltg"
  done
  for isa in "" avx2; do
    if [ -n "$isa" ]; then export AUTOGLM_CPU_ISA=$isa; else unset AUTOGLM_CPU_ISA; fi
    out=$("$bin" bench -m "$f" -p 512 -n 128 -t "$threads" -r 3 2>/dev/null)
    pp=$(echo "$out" | awk -F'|' '/pp512/ { split($7, a, " "); print a[1] }')
    tg=$(echo "$out" | awk -F'|' '/tg128/ { split($7, a, " "); print a[1] }')
    printf '| %s | autoglm%s | %s | %s |\n' "$t" "${isa:+ ($isa)}" "$pp" "$tg"
  done
  unset AUTOGLM_CPU_ISA
done
