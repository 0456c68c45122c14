#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang under ASan+UBSan and runs each for a
# bounded time from its committed seed corpus (fuzz/corpus/TARGET; GGUF and safetensors seeds
# come from ../shared); any finding fails.
#   bash scripts/fuzz.sh              # 10 s per target (what CI runs)
#   bash scripts/fuzz.sh 600          # longer runs: 10 minutes per target
#   bash scripts/fuzz.sh 60 gbnf jinja
# New inputs go to build-fuzz/corpus/TARGET (kept between runs, never committed); a crash
# leaves its input as build-fuzz/crash-* and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(http_request request_json json_schema gbnf jinja tokenizer gguf safetensors upload reasoning anthropic_request tool_calls image projector weights weight_kernels kv_tier_file)
cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz
# Model-file seeds are not committed: GGUF and safetensors files of ../shared seed those targets
# (libFuzzer reads their first -max_len bytes: the headers).
shared=${AUTOGLM_SHARED_DIR:-../shared}
mkdir -p build-fuzz/seeds/gguf build-fuzz/seeds/safetensors
cp "$shared/models/stories260K.gguf" "$shared/models/vocab/ggml-vocab-qwen2.gguf" build-fuzz/seeds/gguf/
cp "$shared/models/hf/qwen2-tiny/model.safetensors" build-fuzz/seeds/safetensors/
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/fuzz_$t.log"
  echo "fuzz_$t: ${seconds}s"
  if ! (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "./fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
        -print_final_stats=1 "corpus/$t" $(ls -d "../fuzz/corpus/$t" "seeds/$t" 2>/dev/null)) >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t: FAILED (input saved under build-fuzz/)" >&2
    exit 1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1 || true)
  echo "fuzz_$t: ok, $execs runs, $rate/s, $cov"
done
