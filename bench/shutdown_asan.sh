#!/usr/bin/env bash
# SIGTERM with streams, a plain request and a task in flight, under ASan: no report, exit 0.
# Needs a server built with -fsanitize=address,undefined, e.g.
#   cmake -S . -B /tmp/asan -G Ninja -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
#     -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined -DAUTOGLM_TESTS=OFF && ninja -C /tmp/asan autoglm
#   bash bench/shutdown_asan.sh /tmp/asan/src/cli/autoglm
bin=$1; m=${2:-../shared/models/stories260K.gguf}
cfg=$(mktemp); printf 'shutdown_grace_s: 1\ncontext_window: 8192\n' > "$cfg"
for round in 1 2 3; do
  "$bin" serve -m "$m" --port 18120 -t 2 --config "$cfg" 2>/tmp/asan-serve.log &
  spid=$!
  for _ in $(seq 400); do grep -q "^ready:" /tmp/asan-serve.log && break; sleep 0.05; done
  for i in 1 2; do
    curl -s -N http://127.0.0.1:18120/v1/completions -d '{"prompt":"Once","max_tokens":6000,"ignore_eos":true,"stream":true}' >/dev/null &
  done
  curl -s http://127.0.0.1:18120/v1/completions -d '{"prompt":"Once","max_tokens":6000,"ignore_eos":true}' >/dev/null &
  curl -s http://127.0.0.1:18120/v1/tasks -d '{"input":"hello there"}' >/dev/null &
  sleep 0.5
  kill -HUP $spid; sleep 0.1
  kill -TERM $spid
  wait $spid; code=$?
  wait
  echo "round $round: exit $code; asan reports: $(grep -c 'ERROR: AddressSanitizer\|runtime error' /tmp/asan-serve.log)"
  grep -m3 -A12 'ERROR: AddressSanitizer' /tmp/asan-serve.log
done
