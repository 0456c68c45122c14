#!/usr/bin/env bash
# Start-up latency: seconds from `autoglm serve` starting to /ready answering 200, over N runs,
# and the engine's log line of what it measured (the step cost, on its own thread after readiness).
#   bash bench/startup.sh [MODEL] [RUNS]   (default: ../shared/models/stories260K.gguf, 5 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-../shared/models/stories260K.gguf}
runs=${2:-5}
bin=build/src/cli/autoglm
log=$(mktemp)
trap 'rm -f "$log"' EXIT
port=$((20000 + RANDOM % 20000))
for _ in $(seq "$runs"); do
  start=$(date +%s.%N)
  "$bin" serve --config config/default.yaml -m "$model" --port "$port" >"$log" 2>&1 &
  pid=$!
  ready=""
  for _ in $(seq 20000); do  # bounded: 100 s at most
    if curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1; then ready=$(date +%s.%N); break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.005
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "$ready" ] || { echo "the server never became ready:"; cat "$log"; exit 1; }
  printf 'ready after %.3f s\n' "$(echo "$ready - $start" | bc)"
done
grep -a "step cost measured" "$log" || echo "(no step-cost line: scheduler.max_step_ms is 0)"
