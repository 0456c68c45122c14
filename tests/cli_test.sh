#!/usr/bin/env bash
# End-to-end checks of the autoglm CLI. Usage: cli_test.sh AUTOGLM_BINARY SHARED_DIR
set -uo pipefail
bin=$1
shared=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check NAME EXPECTED_FRAGMENT OUTPUT
  if [[ "$3" == *"$2"* ]]; then echo "ok   $1"; else echo "FAIL $1: expected '$2' in: $3"; failures=$((failures + 1)); fi
}
# Events are ordered by what the server says, never by a sleep: wait_for polls a command
# until it succeeds (every 0.05 s, for up to 60 s); false if it never did.
wait_for() {  # wait_for COMMAND...
  for _ in $(seq 1200); do "$@" && return 0; sleep 0.05; done
  return 1
}
expect() {  # expect WHAT COMMAND...: fails WHAT unless wait_for COMMAND succeeds
  local what=$1
  shift
  if wait_for "$@"; then echo "ok   $what"; else echo "FAIL $what (waited 60 s)"; failures=$((failures + 1)); fi
}
skip_or_fail() {  # skip_or_fail WHAT PATH: CI always has ../shared (CI=true or AUTOGLM_REQUIRE_SHARED=1)
  if [ "${CI:-}" = "true" ] || [ "${AUTOGLM_REQUIRE_SHARED:-}" = "1" ]; then
    echo "FAIL $1: $2 is absent (../shared), in CI"; failures=$((failures + 1))
  else
    echo "skip $1: $2 is absent"
  fi
}

out=$("$bin" --help 2>&1)
for cmd in run tokenize info bench logits create-model quantize convert export-lora perplexity imatrix; do check "help lists $cmd" "$cmd" "$out"; done
check "run --help" "--top-p" "$("$bin" run --help 2>&1)"

# create-model, info, run and bench on a fresh tiny model.
out=$("$bin" create-model --arch qwen2 --preset tiny --type q8_0 --seed 3 -o "$tmp/tiny.gguf" 2>&1)
check "create-model" "Q8_0 weights" "$out"
out=$("$bin" info -m "$tmp/tiny.gguf" 2>&1)
check "info arch" "architecture:    qwen2" "$out"
check "info types" "Q8_0 x" "$out"
check "info chat template" "chat template:   no" "$out"
out=$("$bin" run -m "$tmp/tiny.gguf" -p "hello" -n 8 --seed 1 -t 1 2>&1)
check "run stats line" "generated tokens: 8, decode:" "$out"
out=$("$bin" bench -m "$tmp/tiny.gguf" -p 16 -n 4 -r 2 -t 1 -t 2 2>&1)
check "bench pp" "pp16" "$out"
check "bench tg" "tg4" "$out"
check "bench threads" "|       2 |" "$out"
out=$("$bin" bench -m "$tmp/tiny.gguf" -p 0 -n 4 -r 1 -t 2 -b 1,3 --parallel-prompt 8 --profile 2>&1)
check "bench parallel" "tg4 x3 @pp8" "$out"
check "bench bandwidth" "measured read bandwidth" "$out"
check "bench probe beside each repetition" "read bandwidth before each repetition (GB/s) and the share of it reached:" "$out"
check "bench profile" "attention: core" "$out"
out=$("$bin" quantize "$tmp/tiny.gguf" "$tmp/tiny-q4k.gguf" q4_k 2>&1)
check "quantize" "(Q4_K_M mix)" "$out"
out=$("$bin" run -m "$tmp/tiny-q4k.gguf" -p "hello" -n 4 --kv-type q8_0 -t 1 2>&1)
check "run quantized, q8_0 KV" "generated tokens: 4" "$out"
out=$("$bin" quantize "$tmp/tiny.gguf" "$tmp/x.gguf" q9_9 2>&1)
check "quantize bad type" "TYPE 'q9_9' is not a weight type" "$out"
out=$("$bin" create-model --type q9_9 -o "$tmp/x.gguf" 2>&1)
check "create-model bad type" "--type 'q9_9' is not a weight type" "$out"

# LoRA: a random adapter, --lora on run, logits and bench (spread over parallel sequences), export-lora.
out=$("$bin" create-model --lora-for "$tmp/tiny.gguf" --rank 4 -o "$tmp/lora.gguf" 2>&1)
check "create-model --lora-for" "a rank-4 LoRA adapter" "$out"
out=$("$bin" run -m "$tmp/tiny.gguf" -p "hello" -n 4 -t 1 --lora "$tmp/lora.gguf:0.5" 2>&1)
check "run --lora" "generated tokens: 4" "$out"
out=$("$bin" run -m "$tmp/tiny.gguf" -p "hello" -n 4 -t 1 --lora "$tmp/lora.gguf:x" 2>&1)
check "run --lora bad scale" "the scale after ':' must be a number" "$out"
out=$("$bin" logits -m "$tmp/tiny.gguf" -p "hello" -o "$tmp/l.bin" --lora "$tmp/lora.gguf" 2>&1)
check "logits --lora" "wrote" "$out"
out=$("$bin" bench -m "$tmp/tiny.gguf" -p 0 -n 2 -r 1 -t 1 -b 2 --parallel-prompt 4 --lora "$tmp/lora.gguf" --lora "$tmp/lora.gguf" --lora-spread 2>&1)
check "bench --lora-spread" "tg2 x2" "$out"
out=$("$bin" export-lora -m "$tmp/tiny.gguf" --lora "$tmp/lora.gguf" -o "$tmp/merged.gguf" 2>&1)
check "export-lora" "with 1 adapter(s) merged" "$out"
check "export-lora output loads" "architecture:    qwen2" "$("$bin" info -m "$tmp/merged.gguf" 2>&1)"

# Errors name the file.
out=$("$bin" run -m "$tmp/missing.gguf" -p x 2>&1)
check "missing model" "$tmp/missing.gguf: cannot open" "$out"
head -c 1000 "$tmp/tiny.gguf" >"$tmp/truncated.gguf"
out=$("$bin" info -m "$tmp/truncated.gguf" 2>&1)
check "truncated model" "truncated.gguf" "$out"

if [ -f "$shared/models/stories260K.gguf" ]; then
  m=$shared/models/stories260K.gguf
  expected=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['greedy']['output_text'])" \
    "$shared/golden/stories260k-once/case.json" 2>/dev/null || true)
  out=$("$bin" run -m "$m" -p "Once upon a time" -n 64 --temp 0 2>/dev/null)
  if [ -n "$expected" ]; then check "run matches the reference text" "Once upon a time$expected" "$out"; fi
  # Speculative decoding prints the same text and reports what it drafted.
  for spec in "ngram" "early-exit --exit-layer 3" "draft --draft-quantize q4_0"; do
    spec_out=$("$bin" run -m "$m" -p "Once upon a time" -n 64 --temp 0 --spec $spec 2>"$tmp/spec.err")
    if [ -n "$expected" ]; then check "run --spec $spec matches the reference text" "Once upon a time$expected" "$spec_out"; fi
    check "run --spec $spec stats" "tokens per target pass" "$(cat "$tmp/spec.err")"
  done
  out=$("$bin" run -m "$m" -p "Once" -n 4 --spec draft --draft "$shared/models/llama-2-tiny-random.gguf" 2>&1)
  check "run --draft with another vocabulary" "draft model: its vocabulary has" "$out"
  out=$("$bin" run -m "$m" -p "Once" -n 4 --spec medusa 2>&1)
  check "run --spec unknown" "'medusa' is not a speculation method" "$out"
  out=$("$bin" bench -m "$m" -p 0 -n 16 -r 1 --spec ngram 2>&1)
  check "bench --spec" "tg16 spec ngram:" "$out"
  # serve takes every method; the draft options are checked before it listens.
  out=$("$bin" serve -m "$m" --port 0 --spec draft 2>&1)
  check "serve --spec draft without a draft" "speculative: spec draft: give a draft model (--draft)" "$out"
  out=$("$bin" serve -m "$m" --port 0 --spec draft --draft "$shared/models/llama-2-tiny-random.gguf" 2>&1)
  check "serve --draft with another vocabulary" "speculative: draft model: its vocabulary has" "$out"
  out=$("$bin" tokenize -m "$m" --ids "Once upon a time" 2>&1)
  check "tokenize ids" "[1, 403, 407, 261, 378]" "$out"
  out=$("$bin" tokenize -m "$m" "Once upon" 2>&1)
  check "tokenize pieces" "403 -> ' Once'" "$out"
  out=$("$bin" logits -m "$m" --tokens 1,403,407,261,378 -o "$tmp/l.f32" 2>&1)
  check "logits top-5" "top-5 of the last row" "$out"
  size=$(stat -c %s "$tmp/l.f32")
  check "logits file size" "10240" "$size"
  "$bin" logits -m "$m" -p "Once upon a time" -o "$tmp/p.f32" >/dev/null 2>&1
  if cmp -s "$tmp/l.f32" "$tmp/p.f32"; then echo "ok   logits --prompt == --tokens"; else echo "FAIL logits prompt"; failures=$((failures + 1)); fi
  "$bin" logits -m "$m" --tokens 1,403,407,261,378 --positions last -o "$tmp/last.f32" >/dev/null 2>&1
  check "logits last row size" "2048" "$(stat -c %s "$tmp/last.f32")"
  out=$("$bin" logits -m "$m" --tokens 1,99999 -o "$tmp/bad.f32" 2>&1)
  check "logits bad id" "--tokens: '99999' is not a token id" "$out"
  # Graceful drain: SIGTERM while a stream is in flight; the stream still ends with [DONE],
  # a new request gets 503, and the server exits 0.
  "$bin" serve -m "$m" --port 0 -t 1 -c 4096 2>"$tmp/serve.log" &
  spid=$!
  expect "serve: ready" grep -q "^ready:" "$tmp/serve.log"
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$')
  body='{"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": true, "stream": true}'
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "${#body}" "$body" >&3
  head -c 200 <&3 >"$tmp/stream.txt"  # the stream has started
  status_line() {  # status_line PATH: the status line of GET PATH (empty when refused)
    (exec 4<>"/dev/tcp/127.0.0.1/$port" && printf 'GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' "$1" >&4 &&
      head -c 12 <&4) 2>/dev/null
  }
  draining() { [ "$(status_line /ready)" = "HTTP/1.1 503" ]; }
  # SIGHUP reloads the routes (here none: the configuration is the flags); the stream in
  # flight goes on and the server keeps answering.
  kill -HUP "$spid"
  expect "SIGHUP: logged as a reload" grep -q "SIGHUP: routes reloaded" "$tmp/serve.log"
  check "SIGHUP: the server still answers" "HTTP/1.1 200" "$(status_line /health)"
  # SIGTERM: the drain has begun once /ready, 200 until now, says 503.
  kill -TERM "$spid"
  expect "drain: begun" draining
  ready=$(status_line /ready)
  health=$(status_line /v1/models)
  cat <&3 >>"$tmp/stream.txt"
  exec 3<&-
  wait "$spid"
  code=$?
  check "drain: new requests get 503" "HTTP/1.1 503" "$health"
  check "drain: not ready" "HTTP/1.1 503" "$ready"
  check "drain: the stream in flight ends with [DONE]" "data: [DONE]" "$(tail -c 200 "$tmp/stream.txt")"
  check "drain: exit code 0" "exit 0" "exit $code"
  echo '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}' >"$tmp/schema.json"
  out=$("$bin" run -m "$m" -p "Once" -n 64 --seed 3 --json-schema "$tmp/schema.json" 2>/dev/null)
  if [[ "$out" =~ ^Once\{\ ?\"n\":\ ?-?[0-9]+\}$ ]]; then
    echo "ok   run --json-schema"; else echo "FAIL run --json-schema: $out"; failures=$((failures + 1)); fi
  printf 'root ::= "yes" | "no"\n' >"$tmp/yn.gbnf"
  out=$("$bin" bench -m "$m" -p 0 -n 16 -r 1 -t 1 --json-schema "$tmp/schema.json" 2>&1)
  check "bench --json-schema" "grammar mask (first sequence, 16 tokens): p50" "$out"
  out=$("$bin" bench -m "$m" -p 16 -n 4 -d 32 -r 1 -t 1 2>&1)
  check "bench -d: prefill at depth" "| pp16 @d32" "$out"
  check "bench -d: decode at depth" "| tg4 @d32" "$out"
  check "bench: sampler time per token" "sampler, temperature 1 top-p 0.95 over" "$out"
  check "bench: GFLOP/s and share of the peak for prefill" "|  GFLOP/s | % of peak |" "$out"
  check "bench: the float and int8 peak probes" "peaks: float FMA" "$out"
  check "bench: the int8 peak probe" "GOP/s (% of peak: of the one the weights' kernels use)" "$out"
  out=$("$bin" run -m "$m" -p "Once" -n 8 --grammar "$tmp/yn.gbnf" 2>/dev/null)
  if [ "$out" == "Onceyes" ] || [ "$out" == "Onceno" ]; then echo "ok   run --grammar"; else
    echo "FAIL run --grammar: '$out'"; failures=$((failures + 1)); fi
  out=$("$bin" run -m "$m" -p "Once" --grammar "$tmp/missing.gbnf" 2>&1)
  check "run --grammar missing file" "missing.gbnf: cannot read it" "$out"
  out=$("$bin" info -m "$shared/models/legacy/tinyllamas-stories-260k-f32.gguf" 2>&1)
  check "v1 rejected" "GGUF v1 is not supported" "$out"
  # The KV disk tier outlives kill -9: a conversation the pool evicted to disk (1 MiB: about 1600
  # positions of stories260K; seven other stories evict the first) is served from there by the next process.
  post() {  # post PORT PATH BODY: the response, head and body
    (exec 5<>"/dev/tcp/127.0.0.1/$1" && printf 'POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' \
      "$2" "${#3}" "$3" >&5 && cat <&5) 2>/dev/null
  }
  story() {  # story WORD: a completion request of about 420 prompt tokens
    local text="Once upon a time there was a $1."
    for _ in $(seq 25); do text="$text She went to the park with her mom and the $1."; done
    echo "{\"prompt\": \"$text\", \"max_tokens\": 8, \"temperature\": 0}"
  }
  serve_tiered() {  # serve_tiered LOG [FLAGS]: the server's pid in tpid, its port in tport
    local log=$1
    shift
    "$bin" serve -m "$m" --port 0 -t 1 --cache-disk-dir "$tmp/kvtier" "$@" 2>"$log" &
    tpid=$!
    wait_for grep -q "^ready:" "$log"
    tport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
  }
  serve_tiered "$tmp/tier1.log" --kv-cache-mib 1
  first=$(post "$tport" /v1/completions "$(story dog)")
  for w in cat bird fish frog duck cow pig; do post "$tport" /v1/completions "$(story $w)" >/dev/null; done
  kill -9 "$tpid"
  wait "$tpid" 2>/dev/null
  serve_tiered "$tmp/tier2.log" --kv-cache-mib 1
  again=$(post "$tport" /v1/completions "$(story dog)")
  metrics=$( (exec 5<>"/dev/tcp/127.0.0.1/$tport" &&
    printf 'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&5 && cat <&5) 2>/dev/null |
    grep 'autoglm_kv_tier_hits_total{.*tier="disk"}')
  kill "$tpid"
  wait "$tpid" 2>/dev/null
  text_of() { grep -o '"text":"[^"]*"' <<<"$1"; }
  if [ -n "$(text_of "$first")" ] && [ "$(text_of "$first")" == "$(text_of "$again")" ]; then
    echo "ok   kv disk tier: the same reply after kill -9"; else
    echo "FAIL kv disk tier: '$(text_of "$again")' vs '$(text_of "$first")'"; failures=$((failures + 1)); fi
  cached=$(grep -o '"cached_tokens":[0-9]*' <<<"$again" | grep -o '[0-9]*$')
  if [ "${cached:-0}" -ge 256 ]; then echo "ok   kv disk tier: $cached prompt tokens from disk"; else
    echo "FAIL kv disk tier: cached_tokens '${cached:-}' in: $again"; failures=$((failures + 1)); fi
  if [[ "$metrics" =~ \ [1-9][0-9]*$ ]]; then echo "ok   kv disk tier: disk hits counted"; else
    echo "FAIL kv disk tier: disk hits: '$metrics'"; failures=$((failures + 1)); fi
  # A graceful stop leaves the pool's cached prefixes on disk: the pool (the default size) evicted
  # nothing, yet the next process finds the conversation there.
  rm -rf "$tmp/kvtier"
  serve_tiered "$tmp/tier3.log"
  first=$(post "$tport" /v1/completions "$(story owl)")
  kill "$tpid"
  wait "$tpid" 2>/dev/null
  saved=$(grep -o 'the cached prefixes saved.*' "$tmp/tier3.log")
  serve_tiered "$tmp/tier4.log"
  again=$(post "$tport" /v1/completions "$(story owl)")
  kill "$tpid"
  wait "$tpid" 2>/dev/null
  cached=$(grep -o '"cached_tokens":[0-9]*' <<<"$again" | grep -o '[0-9]*$')
  if [ -n "$saved" ] && [ "${cached:-0}" -ge 256 ] && [ "$(text_of "$first")" == "$(text_of "$again")" ]; then
    echo "ok   kv disk tier: $cached prompt tokens saved at a graceful stop"; else
    echo "FAIL kv disk tier after a graceful stop: '${saved:-no save logged}', cached '${cached:-}' in: $again"
    failures=$((failures + 1)); fi
else
  skip_or_fail "stories checks" "$shared/models/stories260K.gguf"
fi

hf=$shared/models/hf/qwen2-tiny
if [ -f "$hf/config.json" ]; then
  out=$("$bin" info -m "$hf" 2>&1)
  check "info folder" "(Hugging Face folder)" "$out"
  check "info folder tokenizer" "151669 tokens (bpe, pre qwen2)" "$out"
  folder_text=$("$bin" run -m "$hf" -p "The capital of France is" -n 12 --temp 0 2>/dev/null)
  out=$("$bin" convert "$hf" -o "$tmp/qwen2.gguf" --type f32 2>&1)
  check "convert" "matrices as F32" "$out"
  gguf_text=$("$bin" run -m "$tmp/qwen2.gguf" -p "The capital of France is" -n 12 --temp 0 2>/dev/null)
  if [ -n "$folder_text" ] && [ "$folder_text" == "$gguf_text" ]; then echo "ok   convert then run equals the folder"; else
    echo "FAIL convert then run: '$gguf_text' vs '$folder_text'"; failures=$((failures + 1)); fi
  # llama.cpp loads what convert writes (the padded vocabulary), where the anchor is built
  # (bash ../shared/tools/build-llama-anchor.sh); without it this check is skipped, not failed.
  anchor="${LLAMA_ANCHOR_BIN:-$HOME/.cache/llama-anchor/build/bin}/llama-bench"
  if [ -x "$anchor" ]; then
    out=$("$anchor" -m "$tmp/qwen2.gguf" -p 4 -n 2 -r 1 -t 1 2>&1)
    check "llama.cpp loads the converted qwen2" "| qwen2" "$out"
  else
    echo "skip llama.cpp loads the converted qwen2 (no anchor at $anchor)"
  fi
  out=$("$bin" run -m "$hf" -p "hello" -n 4 --quantize q8_0 -t 1 2>&1)
  check "run folder --quantize q8_0" "generated tokens: 4" "$out"
  out=$("$bin" run -m "$hf" -p "hello" -n 4 --quantize q9 2>&1)
  check "run --quantize bad type" "--quantize 'q9' is not a weight type" "$out"
  out=$("$bin" convert "$tmp" -o "$tmp/x.gguf" 2>&1)
  check "convert without config.json" "$tmp/config.json: cannot open" "$out"
else
  skip_or_fail "Hugging Face folder checks" "$hf"
fi

# info's parameter counts: a dense model's active parameters are all of them; a mixture of
# experts counts only its used experts. create-model's MoE files load in llama.cpp where the
# anchor is built (bash ../shared/tools/build-llama-anchor.sh); without it that check is skipped.
active_and_total() {  # active_and_total INFO_OUTPUT: prints "ACTIVE TOTAL"
  [[ "$1" =~ active\ params:\ +([0-9]+)\ .*\ of\ ([0-9]+) ]] && echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}
out=$("$bin" info -m "$tmp/tiny.gguf" 2>&1)
check "info active params" "active params:" "$out"
check "info bytes per token" "bytes per token:" "$out"
read -r active total <<<"$(active_and_total "$out")"
if [ -n "$total" ] && [ "$active" = "$total" ]; then echo "ok   info dense: active == total"; else
  echo "FAIL info dense: active '$active' vs total '$total'"; failures=$((failures + 1)); fi
anchor="${LLAMA_ANCHOR_BIN:-$HOME/.cache/llama-anchor/build/bin}/llama-bench"
for arch in qwen3moe glm4moe gpt-oss deepseek2; do
  moe=$tmp/moe-$arch.gguf
  out=$("$bin" create-model --arch "$arch" --preset tiny --n-layer 2 --type q8_0 -o "$moe" 2>&1)
  check "create-model --arch $arch" "$arch tiny, Q8_0 weights" "$out"
  out=$("$bin" info -m "$moe" 2>&1)
  check "info $arch experts" "experts:         8, 2 used per token" "$out"
  ran=$("$bin" run -m "$moe" -p "hello" -n 4 --temp 0 -t 1 2>&1)  # a raw prompt (gpt-oss: no harmony)
  check "run $arch from a raw prompt" "generated tokens: 4" "$ran"
  read -r active total <<<"$(active_and_total "$out")"
  if [ -n "$total" ] && [ "$active" -lt "$total" ]; then echo "ok   info $arch: active < total"; else
    echo "FAIL info $arch: active '$active' vs total '$total' in: $out"; failures=$((failures + 1)); fi
  if [ -x "$anchor" ]; then
    out=$("$anchor" -m "$moe" -p 4 -n 2 -r 1 -t 1 2>&1)
    check "llama.cpp loads create-model's $arch" "| $arch" "$out"
  else
    echo "skip llama.cpp loads create-model's $arch (no anchor at $anchor)"
  fi
done
# --cpu-moe and --n-cpu-moe N (llama.cpp's) on run, serve and bench; the cpu accepts them and
# runs as without (its experts are in host memory already).
for cmd in run serve bench; do
  out=$("$bin" "$cmd" --help 2>&1)
  check "$cmd --help lists --cpu-moe" "--cpu-moe" "$out"
  check "$cmd --help lists --n-cpu-moe" "--n-cpu-moe" "$out"
done
moe=$tmp/moe-qwen3moe.gguf
plain=$("$bin" run -m "$moe" -p "hello" -n 6 --temp 0 -t 1 2>/dev/null)
kept=$("$bin" run -m "$moe" -p "hello" -n 6 --temp 0 -t 1 --cpu-moe --n-cpu-moe 1 2>/dev/null)
if [ -n "$plain" ] && [ "$plain" = "$kept" ]; then echo "ok   run --cpu-moe on the cpu: the same text"; else
  echo "FAIL run --cpu-moe on the cpu: '$kept' vs '$plain'"; failures=$((failures + 1)); fi
# --no-mmap (read into private memory) and --mlock (locked in RAM): the same weights, the same text.
for flag in --no-mmap --mlock; do
  loaded=$("$bin" run -m "$moe" -p "hello" -n 6 --temp 0 -t 1 "$flag" 2>/dev/null)
  if [ -n "$plain" ] && [ "$plain" = "$loaded" ]; then echo "ok   run $flag: the same text"; else
    echo "FAIL run $flag: '$loaded' vs '$plain'"; failures=$((failures + 1)); fi
done
# info says how much repacking copies: some MiB for Q8_0 weights, none with AUTOGLM_REPACK=0.
repacked_mib() { [[ "$1" =~ repacked:\ +([0-9.]+)\ MiB ]] && echo "${BASH_REMATCH[1]}"; }
copied=$(repacked_mib "$("$bin" info -m "$moe" 2>&1)")
kept=$(repacked_mib "$(AUTOGLM_REPACK=0 "$bin" info -m "$moe" 2>&1)")
if [ -n "$copied" ] && [ "$copied" != "0.00" ] && [ "$kept" = "0.00" ]; then
  echo "ok   info repacked: $copied MiB, AUTOGLM_REPACK=0: $kept"
else
  echo "FAIL info repacked: '$copied' MiB, AUTOGLM_REPACK=0: '$kept'"; failures=$((failures + 1))
fi
out=$("$bin" run -m "$moe" -p "hello" -n 2 --n-cpu-moe -1 2>&1)
check "run --n-cpu-moe -1" "--n-cpu-moe" "$out"
out=$("$bin" bench -m "$moe" -p 4 -n 2 -r 1 -t 1 --n-cpu-moe 1 2>&1)
check "bench --n-cpu-moe on the cpu" "tg2" "$out"
out=$("$bin" create-model --arch llama --preset 30b-a3b -o "$tmp/x.gguf" 2>&1)
check "create-model MoE preset for a dense arch" "--preset '30b-a3b' is not one of tiny, 150m, 1b" "$out"
out=$("$bin" create-model --arch qwen2 --preset 150m --n-layer 1 --type q8_0 -o "$tmp/one.gguf" 2>&1 &&
  "$bin" info -m "$tmp/one.gguf" 2>&1)
check "create-model --n-layer" "layers:          1" "$out"

# Quantization quality on the command line: imatrix writes an importance matrix, quantize refuses
# IQ2_XXS without one (naming the flag) and writes it with one, and perplexity saves the base's
# log-probabilities and scores a model against them (itself: no divergence; the IQ2_XXS file: some).
text="$(dirname "$0")/data/stories_ppl.txt"
base=$tmp/tiny-f16.gguf
"$bin" create-model --preset tiny -o "$base" >/dev/null 2>&1
out=$("$bin" imatrix -m "$base" -f "$text" -c 128 --chunks 8 -o "$tmp/tiny.imatrix" -t 1 2>&1)
check "imatrix writes the file" "wrote $tmp/tiny.imatrix: 14 matrices over 8 chunks" "$out"
out=$("$bin" quantize "$base" "$tmp/iq2.gguf" IQ2_XXS 2>&1)
check "quantize IQ2_XXS without an importance matrix" "needs an importance matrix: give --imatrix FILE" "$out"
out=$("$bin" quantize --imatrix "$tmp/tiny.imatrix" "$base" "$tmp/iq2.gguf" IQ2_XXS 2>&1)
check "quantize --imatrix IQ2_XXS" "IQ2_XXS x12" "$out"
out=$("$bin" perplexity -m "$base" -f "$text" -c 128 --chunks 8 --kl-divergence-base "$tmp/base.kld" -t 1 2>&1)
check "perplexity saves the base" "Final estimate: PPL =" "$out"
out=$("$bin" perplexity -m "$base" -f "$text" -c 128 --chunks 8 --kl-divergence-base "$tmp/base.kld" \
  --kl-divergence -t 1 2>&1)
check "perplexity --kl-divergence of the base itself" "Same top p: 100.000" "$out"
out=$("$bin" perplexity -m "$tmp/iq2.gguf" -f "$text" -c 128 --chunks 8 --kl-divergence-base "$tmp/base.kld" \
  --kl-divergence -t 1 2>&1)
if [[ "$out" =~ Mean\ +KLD:\ +([0-9.]+) ]] && awk -v k="${BASH_REMATCH[1]}" 'BEGIN { exit !(k > 0.001 && k < 1) }'; then
  echo "ok   perplexity --kl-divergence of IQ2_XXS: mean KLD ${BASH_REMATCH[1]}"
else
  echo "FAIL perplexity --kl-divergence of IQ2_XXS: $out"; failures=$((failures + 1))
fi

echo "cli: $failures failed"
[ "$failures" -eq 0 ]
