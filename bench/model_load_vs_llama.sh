#!/usr/bin/env bash
# How long a server takes from start to ready on the 1b preset (q4_0) beside llama-server 2026-09
# (../shared/tools/build-llama-anchor.sh with the llama-server target), warm page cache and cold
# (when /proc/sys/vm/drop_caches is writable), and the memory of two servers on the same file:
# RSS and PSS (a page two processes share counts half in each PSS), with the weights repacked
# (the default) and mapped as they are (AUTOGLM_REPACK=0).
#   bash bench/model_load_vs_llama.sh          # WORK=/tmp/autoglm-kv-tiers THREADS=2 RUNS=3
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/build/src/cli/autoglm
lq=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
work=${WORK:-/tmp/autoglm-kv-tiers}
threads=${THREADS:-2}
runs=${RUNS:-3}
mkdir -p "$work"
model=$work/1b-q4_0.gguf
[ -f "$model" ] || "$bin" create-model --arch llama --preset 1b --type q4_0 -o "$model" >/dev/null
grep -m1 'model name' /proc/cpuinfo

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
status_of() { /usr/bin/python3 -c "import urllib.request, sys
try: print(urllib.request.urlopen('http://127.0.0.1:$1$2', timeout=1).status)
except Exception: print(0)"; }

start_ours() {  # start_ours PORT [ENV...]
  env "${@:2}" "$bin" serve -m "$model" --port "$1" -t "$threads" --kv-cache-mib 256 2>/dev/null &
  pid=$!
}
start_llama() {
  LD_LIBRARY_PATH=$lq "$lq/llama-server" -m "$model" --port "$1" -t "$threads" -c 4096 >/dev/null 2>&1 &
  pid=$!
}
# Seconds from start to a 200 on the readiness path.
time_to_ready() {  # time_to_ready START_FN READY_PATH
  local port t0 t1
  port=$(free_port)
  t0=$(date +%s.%N)
  "$1" "$port"
  for _ in $(seq 6000); do [ "$(status_of "$port" "$2")" = 200 ] && break; sleep 0.02; done
  t1=$(date +%s.%N)
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$t1 - $t0" | bc -l | xargs printf '%.2f'
}
drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }

printf '| server | warm page cache (s, best of %d) | cold (s) |\n|---|---:|---:|\n' "$runs"
for who in ours llama; do
  fn=start_$who
  path=/ready
  [ $who = llama ] && path=/health
  best=999
  for _ in $(seq "$runs"); do
    t=$(time_to_ready "$fn" "$path")
    best=$(echo "if ($t < $best) $t else $best" | bc -l)
  done
  cold="(drop_caches not writable)"
  drop_caches && cold=$(time_to_ready "$fn" "$path")
  printf '| %s | %.2f | %s |\n' "$who" "$best" "$cold"
done

# Two servers on the same file: each one's RSS and PSS once both have answered a request.
mem_of() { awk '/^Rss:/ {r = $2} /^Pss:/ {p = $2} END {printf "%d %d\n", r / 1024, p / 1024}' "/proc/$1/smaps_rollup"; }
ask() { /usr/bin/python3 -c "import json, urllib.request
urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:$1/v1/completions', data=json.dumps(
    {'prompt': 'Once upon a time', 'max_tokens': 8}).encode(), headers={'Content-Type': 'application/json'}))"; }
printf '\n| two servers on one file | RSS each (MiB) | PSS each (MiB) |\n|---|---:|---:|\n'
for repack in 1 0; do
  pids=()
  for _ in 1 2; do
    port=$(free_port)
    start_ours "$port" AUTOGLM_REPACK=$repack
    for _ in $(seq 2400); do [ "$(status_of "$port" /ready)" = 200 ] && break; sleep 0.05; done
    ask "$port"
    pids+=("$pid")
  done
  read -r r1 p1 < <(mem_of "${pids[0]}")
  read -r r2 p2 < <(mem_of "${pids[1]}")
  printf '| autoglm, AUTOGLM_REPACK=%s | %s, %s | %s, %s |\n' "$repack" "$r1" "$r2" "$p1" "$p2"
  kill "${pids[@]}"
  wait "${pids[@]}" 2>/dev/null || true
done
