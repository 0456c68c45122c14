#!/usr/bin/env bash
# Conversations that return after other traffic evicted them from the KV pool: bench_serve.mjs
# --returning (round by round) against one server with and without the RAM tier (--cache-ram), at
# the same pool size, on the 1b preset (q4_0).
#   bash bench/kv_tiers_returning.sh     # N=6 conversations, TURNS=3, WORDS=500 a turn, THREADS=2
set -euo pipefail
source "$(dirname "$0")/kv_tiers_common.sh"
n=${N:-6}
turns=${TURNS:-3}
words=${WORDS:-500}
context=8192
# A turn of WORDS words is about 2 WORDS tokens (its reply 16 more); the pool holds TURNS + 1 of them:
# the longest conversation, and less than what the other conversations' turns take between two of its
# own (N > TURNS + 2).
pool_mib=$(( (words * 2 + 16) * (turns + 1) * kv_bytes_per_position / 1048576 + 1 ))
grep -m1 'model name' /proc/cpuinfo
echo "pool ${pool_mib} MiB; $n conversations of $turns turns, $words words a turn; $threads threads"

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
