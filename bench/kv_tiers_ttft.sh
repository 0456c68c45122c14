#!/usr/bin/env bash
# Time to first token of a returning conversation of TOKENS prompt tokens (default 8192) on the 1b
# preset (q4_0, 2 threads) whose KV is: in the pool, in the RAM tier (--cache-ram), in the disk tier
# after a restart (--cache-disk-dir), or recomputed (evicted, no tiers). The pool holds 1.3
# conversations: two more evict the first whole.
#   bash bench/kv_tiers_ttft.sh                 # TOKENS=8192 WORK=/tmp/autoglm-kv-tiers THREADS=2
#   CASES="ram disk" bash bench/kv_tiers_ttft.sh  # some of: plain (pool and recomputed), ram, disk
set -euo pipefail
source "$(dirname "$0")/kv_tiers_common.sh"
tokens=${TOKENS:-8192}
context=$((tokens + 64))
pool_mib=$(( tokens * kv_bytes_per_position * 13 / 10 / 1048576 + 1 ))  # room for 1.3 conversations
grep -m1 'model name' /proc/cpuinfo

ask() {  # ask CONVERSATION: seconds to the reply of one token (its first), and the cached tokens
  /usr/bin/python3 - "$sport" "$tokens" "$1" <<'EOF'
import json, sys, time, urllib.request
port, n, conv = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=3600)
# A text of the conversation's own words, cut to n - 1 tokens (the BOS makes n).
words = ["river", "stone", "light", "garden", "window", "silver", "morning", "paper", "cloud", "bridge"]
text = " ".join(words[(i * 7 + conv * 13 + i // 10) % len(words)] + str((i * 31 + conv) % 997) for i in range(n))
ids = json.load(post("/tokenize", {"content": text, "add_special": False}))["tokens"][: n - 1]
prompt = json.load(post("/detokenize", {"tokens": ids}))["content"]
body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
t = time.monotonic()
with post("/v1/completions", body) as r:
    reply = json.load(r)
cached = reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
print("%.3f %d" % (time.monotonic() - t, cached))
EOF
}

runs() { [[ " ${CASES:-plain ram disk} " == *" $1 "* ]]; }

printf '| KV of the returning %d-token conversation | TTFT (s) | cached tokens |\n|---|---:|---:|\n' "$tokens"
if runs plain; then
serve "$work/plain.log"
ask 1 >/dev/null
read -r t c < <(ask 1)
printf '| in the pool | %s | %s |\n' "$t" "$c"
ask 2 >/dev/null  # with 3: evicts conversation 1
ask 3 >/dev/null
read -r t c < <(ask 1)
printf '| recomputed (evicted, no tiers) | %s | %s |\n' "$t" "$c"
stop
fi

if runs ram; then
serve "$work/ram.log" --cache-ram $((pool_mib * 2))
ask 1 >/dev/null
ask 2 >/dev/null
ask 3 >/dev/null
read -r t c < <(ask 1)
printf '| RAM tier | %s | %s |\n' "$t" "$c"
stop
fi

if runs disk; then
rm -rf "$work/disk"
serve "$work/disk1.log" --cache-disk-dir "$work/disk" --cache-disk-mib $((pool_mib * 4))
ask 1 >/dev/null
ask 2 >/dev/null
ask 3 >/dev/null
kill -9 "$spid"
wait "$spid" 2>/dev/null || true
serve "$work/disk2.log" --cache-disk-dir "$work/disk" --cache-disk-mib $((pool_mib * 4))
read -r t c < <(ask 1)
printf '| disk tier, after kill -9 and a restart | %s | %s |\n' "$t" "$c"
stop
fi
