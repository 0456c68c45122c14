#!/usr/bin/env bash
# Two builds of `autoglm serve` side by side on one machine: the same bench_serve.py workload at
# concurrency 1 and 16 against each, alternated (A, B, A, B, ...) so that a drifting machine
# weighs on both alike. For changes to the server's request path: a regression shows as a
# throughput or latency gap larger than the spread between repetitions of one build.
#   bench/serve_ab.sh OLD_AUTOGLM NEW_AUTOGLM MODEL [REPS]
set -euo pipefail
old=$1 new=$2 model=$3 reps=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
declare -A port
cleanup() {
  for f in "$work"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
for side in old new; do  # each on a free port; ready once it logs "ready:"
  "${!side}" serve -m "$model" --port 0 -t 2 2>"$work/$side.log" &
  echo $! >"$work/$side.pid"
  # Reads the log as it grows (tail ends with the server) until "ready:", for at most 60 s.
  timeout 60 grep -q -m1 'ready:' <(tail -n +1 -f --pid="$(cat "$work/$side.pid")" "$work/$side.log") ||
    { echo "serve_ab: $side did not become ready:"; cat "$work/$side.log"; exit 1; }
  port[$side]=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$side.log" | head -1)
done
for c in 1 16; do
  n=$((c == 1 ? ${N1:-24} : ${N16:-96}))
  for rep in $(seq "$reps"); do
    for side in old new; do
      out=$("$python" "$here/bench_serve.py" --url "http://127.0.0.1:${port[$side]}" -n "$n" -c "$c" \
        --prompt-len 64 --output-len 48 --seed "$rep")
      tput=$(sed -n 's/.*, \([0-9.]*\) output tok\/s/\1/p' <<<"$out")
      ttft=$(awk '/time to first token/ {print $5}' <<<"$out")
      itl=$(awk '/inter-token latency/ {print $3}' <<<"$out")
      printf 'c=%-2s rep %s %-3s  %9s output tok/s  ttft p50 %7s ms  inter-token p50 %6s ms\n' \
        "$c" "$rep" "$side" "$tput" "$ttft" "$itl"
    done
  done
done
