#!/usr/bin/env bash
# The time to first token of a phone agent's steps, served by autoglm and by llama.cpp 2026-09's
# llama-server side by side, on the same GLM-4.1V-9B-shaped files (create-model --arch glm4v
# --preset 9b --type q4_k; the text model cut to --n-layer 1 so that a run fits a session on two
# cores: the tower is whole) and a 1080x2400 screenshot at the agent's max_pixels (5,000,000: no
# resize). Each request is non-streamed with max_tokens 1, so its total time is its TTFT.
#   step 1:  [system, user(screenshot A, task)]                         nothing cached
#   step 2:  [system, user(task), assistant(step 1's action),
#             user(screenshot A again, "** Screen Info **")]             the screen did not change
#            (the client strips older turns' images, so the history's KV cannot be reused past
#            the first user turn; what can be reused is screenshot A's embedding)
#   step 2': step 2 sent again                                          the whole prompt cached
# Usage: bash bench/vision_agent_ttft.sh   (needs build/ and the anchor's llama-server:
#   cmake --build ~/.cache/llama-anchor/build --target llama-server)
set -euo pipefail
bin=${AUTOGLM_BIN:-build/src/cli/autoglm}
anchor=${LLAMA_BIN:-$HOME/.cache/llama-anchor/build/bin}
dir=${BENCH_DIR:-/tmp/vision-bench}
threads=${THREADS:-2}
mkdir -p "$dir"
model=$dir/glm4v-9b-L1-q4_k.gguf
mmproj=${model%.gguf}.mmproj.gguf
[ -f "$model" ] || "$bin" create-model --arch glm4v --preset 9b --n-layer 1 --type q4_k -o "$model"
/usr/bin/python3 "$(dirname "$0")/screenshot.py" "$dir/screen-1080x2400.png" 1080 2400
/usr/bin/python3 - "$dir" <<'PY'
import base64, json, sys
d = sys.argv[1]
url = "data:image/png;base64," + base64.b64encode(open(f"{d}/screen-1080x2400.png", "rb").read()).decode()
system = {"role": "system", "content": "You are a phone agent. Answer with do(action=...) or finish(message=...)."}
task = "Open the settings app and turn on Wi-Fi."
def shot(text):
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]}
common = {"model": "autoglm-phone-9b", "max_tokens": 1, "temperature": 0, "stream": False}
step1 = dict(common, messages=[system, shot(task)])
step2 = dict(common, messages=[system, {"role": "user", "content": task},
                               {"role": "assistant", "content": 'do(action="Launch", app="Settings")'},
                               shot("** Screen Info **")])
json.dump(step1, open(f"{d}/step1.json", "w"))
json.dump(step2, open(f"{d}/step2.json", "w"))
PY
lscpu | grep "Model name"

wait_ready() {  # until the server answers /v1/models (or /health), at most 10 minutes
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null && return 0
    sleep 1
  done
  echo "server on port $1 did not come up" >&2
  return 1
}
measure() {  # name port
  for step in step1 step2 step2; do  # the second step2: the same request again
    t=$(curl -s -o "$dir/$1-$step.out" -w "%{time_total}" -H "Content-Type: application/json" \
      --data-binary "@$dir/$step.json" "http://127.0.0.1:$2/v1/chat/completions")
    grep -q '"choices"' "$dir/$1-$step.out" || { echo "$1 $step failed: $(head -c 300 "$dir/$1-$step.out")" >&2; }
    echo "$1 $step: ${t}s"
  done
}

"$bin" serve -m "$model" --mmproj "$mmproj" --served-model-name autoglm-phone-9b -t "$threads" -c 8192 --port 18431 \
  >"$dir/autoglm-serve.log" 2>&1 &
pid=$!
wait_ready 18431 && measure autoglm 18431
kill $pid; wait $pid 2>/dev/null || true

"$anchor/llama-server" -m "$model" --mmproj "$mmproj" --alias autoglm-phone-9b -t "$threads" -c 8192 --port 18432 \
  --jinja >"$dir/llama-server.log" 2>&1 &
pid=$!
wait_ready 18432 && measure llama-server 18432
kill $pid; wait $pid 2>/dev/null || true
