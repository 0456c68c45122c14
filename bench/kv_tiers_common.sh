# Sourced by the KV tier benches (kv_tiers_ttft.sh, kv_tiers_returning.sh): the 1b preset at q4_0 in
# WORK, and one server at a time. Set `context` and `pool_mib` before calling serve.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=$PWD/build/src/cli/autoglm
work=${WORK:-/tmp/autoglm-kv-tiers}
threads=${THREADS:-2}
mkdir -p "$work"
model=$work/1b-q4_0.gguf
[ -f "$model" ] || "$bin" create-model --arch llama --preset 1b --type q4_0 -o "$model" >/dev/null
kv_bytes_per_position=22528  # the 1b preset's f16 KV: 22 layers x 2 x 256 x 2 bytes

serve() {  # serve LOG ARGS...: starts a server; its pid in spid, its port in sport
  local log=$1
  shift
  "$bin" serve -m "$model" --port 0 -t "$threads" -c "$context" --max-batch-tokens 512 --kv-cache-mib "$pool_mib" \
    "$@" 2>"$log" &
  spid=$!
  # Up to two minutes for the server's own "ready:" line; a server that exits or never gets there stops
  # the bench with its log.
  for _ in $(seq 1200); do
    grep -q "^ready:" "$log" && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q "^ready:" "$log"; then
    echo "the server never reported ready; its log ($log):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  sport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
trap 'kill "${spid:-0}" 2>/dev/null || true' EXIT
