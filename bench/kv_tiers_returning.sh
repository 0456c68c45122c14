#!/usr/bin/env bash
# Conversations that return after other traffic evicted them from the KV pool: bench_serve.mjs
# --returning (round by round) against one server with and without the RAM tier (--cache-ram), at
# the same pool size, on the 1b preset (q4_0).
#   bash bench/kv_tiers_returning.sh     # N=6 conversations, TURNS=3, WORDS=500 a turn, THREADS=2
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build/src/cli/autoglm
work=${WORK:-/tmp/autoglm-kv-tiers}
n=${N:-6}
turns=${TURNS:-3}
words=${WORDS:-500}
threads=${THREADS:-2}
mkdir -p "$work"
model=$work/1b-q4_0.gguf
[ -f "$model" ] || "$bin" create-model --arch llama --preset 1b --type q4_0 -o "$model" >/dev/null
# The 1b preset's f16 KV: 22 layers x 2 x 256 x 2 bytes a position. A turn of WORDS words is about
# 2 WORDS tokens (its reply 16 more); the pool holds TURNS + 1 of them: the longest conversation, and
# less than what the other conversations' turns take between two of its own (N > TURNS + 2).
pool_mib=$(( (words * 2 + 16) * (turns + 1) * 22528 / 1048576 + 1 ))
grep -m1 'model name' /proc/cpuinfo
echo "pool ${pool_mib} MiB; $n conversations of $turns turns, $words words a turn; $threads threads"

serve() {  # serve LOG ARGS...: starts a server; its pid in spid, its port in sport
  local log=$1
  shift
  "$bin" serve -m "$model" --port 0 -t "$threads" -c 8192 --max-batch-tokens 512 --kv-cache-mib "$pool_mib" \
    "$@" 2>"$log" &
  spid=$!
  for _ in $(seq 1200); do grep -q "^ready:" "$log" && break; sleep 0.1; done
  sport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
trap 'kill "${spid:-0}" 2>/dev/null || true' EXIT

for case in plain ram; do
  extra=()
  [ "$case" = ram ] && extra=(--cache-ram 1024)
  serve "$work/returning-$case.log" ${extra[@]+"${extra[@]}"}
  node bench/bench_serve.mjs --url "http://127.0.0.1:$sport" -n "$n" -c 1 --turns "$turns" --returning \
    --prompt-len "$words" --output-len 16 >"$work/returning-$case.txt" || true
  stop
  echo "== $case"
  cat "$work/returning-$case.txt"
done
