#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one run. Takes the binaries of $CUDA_CHECK_PACK_DIR
# (default .device)/pack.tar.xz (scripts/cuda-pack.sh: a CUDA build made elsewhere, for a
# machine that cannot build this project) or else builds with CUDA for the GPU at hand, then,
# by STEPS (default: all four):
#   tests  the CUDA op and engine tests against the CPU (test_backend, Cuda.*; again under
#          compute-sanitizer memcheck where it is) and the golden
#          logits and greedy cases on cuda (AUTOGLM_TEST_DEVICE=cuda test_golden): those whose
#          model is there; the summary names the ones that were not;
#   bench  autoglm bench of the 1b preset (TinyLlama shape) in BENCH_TYPES on cuda:
#          pp512, tg128 against the decode bound of the measured memory bandwidth, and decode
#          at BENCH_PARALLEL streams; PyTorch's GEMV chain of the same shape where torch is;
#   serve  autoglm serve on cuda under bench_serve at concurrency 1 and 16 (Node.js's
#          bench_serve.mjs, or bench_serve.py where there is no Node);
#   llama  llama.cpp's llama-bench and llama-batched-bench on the same files, with CUDA, from
#          $CUDA_CHECK_PACK_DIR/llama-cuda.tar.xz (scripts/build-llama-cuda.sh) when present.
# BENCH_TYPES (default "f16 q8_0 q4_0") and BENCH_PARALLEL (default 1,16,64) size the benchmarks.
# Writes $OUT/summary.md (the results) and $OUT/cuda-check.log (everything), or build-cuda/.
#   bash scripts/cuda-check.sh                 STEPS="tests" bash scripts/cuda-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-cuda}
mkdir -p "$out"
exec > >(tee "$out/cuda-check.log") 2>&1
summary=$out/summary.md
steps=" ${STEPS:-tests bench serve llama} "
packs=${CUDA_CHECK_PACK_DIR:-.device}
bench_types=${BENCH_TYPES:-f16 q8_0 q4_0}
bench_parallel=${BENCH_PARALLEL:-1,16,64}
step() { printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
note() { printf '%s\n' "$*" >>"$summary"; }
failures=0
check() {  # check NAME CMD...: runs it, counts and notes a failure
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; note "- FAILED: $1"; failures=$((failures + 1)); fi
}
wants() { [[ $steps == *" $1 "* ]]; }

step "machine"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
echo "gpu: $gpu; cpus: $(nproc)"
printf '# cuda-check %s\n\nGPU: %s; %s CPUs; steps:%s\n' "$(date -u +%FT%TZ)" "$gpu" "$(nproc)" "$steps" >"$summary"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

# Device-to-device copy bandwidth (bytes read + written), the ceiling of a decode step.
bandwidth_gbs=$(timeout 60 python3 - 2>/dev/null <<'EOF'
import torch
a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): b.copy_(a)
e.record(); torch.cuda.synchronize()
print(f"{2 * 10 * a.numel() / (s.elapsed_time(e) / 1000) / 1e9:.0f}")
EOF
) || bandwidth_gbs=""
note "Device-to-device copy (read + write, torch): ${bandwidth_gbs:-not measured} GB/s"

step "binaries"
# The folders of CUDA's libraries (the toolkit's; NCCL, which llama.cpp links, from PyTorch's).
library_dir() {
  local found
  found=$( (ldconfig -p | awk -v lib="$1" '$1 == lib {print $NF; exit}'; find /usr/local/cuda* /opt /usr/lib -name "$1" 2>/dev/null) | head -1)
  [ -n "$found" ] && dirname "$found"
}
if [ -f "$packs/pack.tar.xz" ]; then
  pack=/tmp/autoglm-pack
  rm -rf "$pack" && mkdir -p "$pack" && xz -dc "$packs/pack.tar.xz" | tar -C "$pack" -xf -
  bin=$pack/bin
  export AUTOGLM_SHARED_DIR=$pack/shared
  cuda_libs=$(library_dir libcublas.so.13):$(library_dir libnccl.so.2)
  export LD_LIBRARY_PATH=$pack/lib:$cuda_libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "pack: $(ls "$bin" | tr '\n' ' '); CUDA libraries from $cuda_libs"
  if ldd "$bin/autoglm" | grep 'not found'; then note "- FAILED: the packed binaries miss libraries (above)"; exit 1; fi
else
  export AUTOGLM_SHARED_DIR=${AUTOGLM_SHARED_DIR:-$PWD/../shared}
  if ! cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOGLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native -DAUTOGLM_PYTHON=OFF -DAUTOGLM_SANITIZER_TESTS=OFF >/dev/null; then
    note "- FAILED: configure (scripts/install-deps.sh --build-only installs what it misses)"
    exit 1
  fi
  cmake --build build-cuda -j "$(nproc)" --target autoglm test_backend test_golden || { note "- FAILED: build"; exit 1; }
  mkdir -p build-cuda/bin
  ln -sf ../src/cli/autoglm ../tests/test_backend ../tests/test_golden build-cuda/bin/
  bin=$PWD/build-cuda/bin
fi
cli=$bin/autoglm

if wants tests; then
  step "1. CUDA ops and engine against the CPU"
  check "test_backend" timeout 300 "$bin/test_backend" --gtest_color=no
  if command -v compute-sanitizer >/dev/null; then
    check "compute-sanitizer memcheck (the Cuda tests)" timeout 240 compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$bin/test_backend" --gtest_color=no --gtest_filter='Cuda*'
  fi
  note "" "## test_backend (cuda against the cpu)" ""
  grep -E '^\[(cuda vs cpu|q8 kv)\]|^\[  (FAILED|SKIPPED|PASSED) |^=+ (ERROR SUMMARY|Invalid)' "$out/cuda-check.log" |
    grep -v ' ms)$' |
    sed 's/^/    /' >>"$summary"

  step "2. golden cases on cuda"
  # The cases whose model file is here: gtest names are the case names with '_' for the rest.
  mapfile -t present < <(python3 - "$AUTOGLM_SHARED_DIR" <<'EOF'
import json, os, re, sys
shared = sys.argv[1]
for c in json.load(open(os.path.join(shared, "golden/index.json")))["cases"]:
    here = os.path.exists(os.path.join(shared, c["model"]))
    print(("+" if here else "-") + re.sub(r"[^A-Za-z0-9]", "_", c["name"]))
EOF
  )
  filter=$(printf '%s\n' "${present[@]}" | sed -n 's/^+\(.*\)/*\/\1/p' | paste -sd: -)
  absent=$(printf '%s\n' "${present[@]}" | sed -n 's/^-//p' | paste -sd' ' -)
  mark=$(wc -l <"$out/cuda-check.log")
  check "test_golden on cuda" env AUTOGLM_TEST_DEVICE=cuda timeout 300 "$bin/test_golden" --gtest_color=no \
    "--gtest_filter=${filter:-none}"
  note "" "## golden cases on cuda (not in this run: ${absent:-none})" ""
  tail -n +"$mark" "$out/cuda-check.log" | grep -E '^\[golden\]|^\[kv accuracy\]|^\[  FAILED |^\[  PASSED' |
    sed 's/^/    /' >>"$summary"
fi

models=/tmp/autoglm-bench-models
mkdir -p "$models"
model_for() {  # model_for TYPE: the 1b preset in TYPE, made once
  [ -f "$models/1b-$1.gguf" ] || "$cli" create-model --preset 1b --type "$1" -o "$models/1b-$1.gguf" >/dev/null
  echo "$models/1b-$1.gguf"
}

if wants serve; then
  step "3. serving on cuda at concurrency 1 and 16"
  note "" "## serving (1b q4_0, cuda)" ""
  $cli serve --device cuda -m "$(model_for q4_0)" --port 18080 --max-running 64 --kv-cache-mib 8192 \
    --max-batch-tokens 2048 >"$out/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 120); do curl -sf http://127.0.0.1:18080/ready >/dev/null 2>&1 && break; sleep 1; done
  client=(python3 bench/bench_serve.py)
  command -v node >/dev/null && client=(node bench/bench_serve.mjs)
  for c in 1 16; do
    mark=$(wc -l <"$out/cuda-check.log")
    check "bench_serve c=$c" timeout 180 "${client[@]}" --url http://127.0.0.1:18080 -n $((c * 4)) -c $c \
      --prompt-len 96 --output-len 128
    tail -n +"$mark" "$out/cuda-check.log" | grep -vE '^(ok|FAILED):' | sed 's/^/    /' >>"$summary"
  done
  curl -s http://127.0.0.1:18080/metrics | grep -E '^autoglm_(kv_cache_usage_perc|generated_tokens_total)' || true
  kill -TERM $server
  wait $server
fi

if wants bench; then
  step "4. bench (1b preset) on cuda"
  note "" "## autoglm bench, 1b preset, cuda" ""
  for type in $bench_types; do
    m=$(model_for "$type")
    bytes=$(stat -c %s "$m")
    mark=$(wc -l <"$out/cuda-check.log")
    check "bench $type" timeout 240 "$cli" bench --device cuda -m "$m" -p 512 -n 128 -r 3 -b "$bench_parallel" \
      --parallel-prompt 128
    bound=""
    [ -n "$bandwidth_gbs" ] && bound=$(python3 -c "print(f'{$bandwidth_gbs * 1e9 / $bytes:.0f}')")
    note "$type: file $((bytes >> 20)) MiB; decode bound (the weights read once per token at the copy bandwidth): ${bound:-?} tok/s"
    tail -n +"$mark" "$out/cuda-check.log" | grep -vE '^(ok|FAILED):' | sed 's/^/    /' >>"$summary"
  done

  step "4b. PyTorch side by side"
  timeout 120 python3 - <<'EOF' | tee -a "$summary"
import time, torch
# The 1b preset's shape (TinyLlama-1.1B): 22 layers, 2048 wide, 5632 FFN, 32 heads, 4 KV heads.
d, ff, L, vocab = 2048, 5632, 22, 32000
w = [torch.randn(n, m, dtype=torch.float16, device="cuda") * 0.02
     for _ in range(L) for n, m in ((2048 + 512, d), (d, d), (2 * ff, d), (d, ff))] + \
    [torch.randn(vocab, d, dtype=torch.float16, device="cuda") * 0.02]
inputs = {k: torch.randn(1, k, dtype=torch.float16, device="cuda") for k in (d, ff)}
def step():
    for m in w:
        torch.nn.functional.linear(inputs[m.shape[1]], m)
for _ in range(5): step()
torch.cuda.synchronize(); t = time.time(); n = 50
for _ in range(n): step()
torch.cuda.synchronize()
print(f"\ntorch f16 GEMV chain of the 1b preset's matrices at batch 1 (no attention): {n / (time.time() - t):.1f} steps/s")
EOF
fi

if wants llama && [ -f "$packs/llama-cuda.tar.xz" ]; then
  step "5. llama.cpp with CUDA on the same files"
  note "" "## llama.cpp 2026-09, CUDA, same files" ""
  llama=/tmp/llama-cuda
  rm -rf "$llama" && mkdir -p "$llama" && xz -dc "$packs/llama-cuda.tar.xz" | tar -C "$llama" -xf -
  export LD_LIBRARY_PATH=$llama/lib:$LD_LIBRARY_PATH
  for type in $bench_types; do
    mark=$(wc -l <"$out/cuda-check.log")
    check "llama-bench $type" timeout 180 "$llama/bin/llama-bench" -m "$(model_for "$type")" -p 512 -n 128 -r 3 -ngl 99
    tail -n +"$mark" "$out/cuda-check.log" | grep -E '^\|' | sed 's/^/    /' >>"$summary"
  done
  mark=$(wc -l <"$out/cuda-check.log")
  check "llama-batched-bench q4_0" timeout 180 "$llama/bin/llama-batched-bench" -m "$(model_for q4_0)" \
    -npp 128 -ntg 128 -npl "$bench_parallel" -c 32768 -ngl 99
  tail -n +"$mark" "$out/cuda-check.log" | grep -E '^\|' | sed 's/^/    /' >>"$summary"
fi

step "done: $failures failed"
note "" "$failures failed"
exit $((failures > 0))
