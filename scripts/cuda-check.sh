#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one run (issue 21's "must show"): builds with CUDA for
# the GPU at hand, then
#   1. the CUDA op tests against the CPU (tests/test_backend.cpp, Cuda.*),
#   2. the golden logits and greedy cases on cuda (AUTOGLM_TEST_DEVICE=cuda test_golden),
#   3. autoglm bench of the 1b preset (TinyLlama shape) in F16, Q8_0, Q4_0 and Q4_K on cuda:
#      pp512, tg128 (share of the GPU's nominal memory bandwidth), decode at 1, 8 and 64 streams,
#   4. serving at concurrency 64 (bench/bench_serve.mjs) when Node.js is there,
#   5. PyTorch on the same model shape when python3 can import torch with CUDA.
# Everything it prints also goes to $OUT/cuda-check.log (or build-cuda/cuda-check.log).
#   bash scripts/cuda-check.sh            (QUICK=1: steps 1-2 and one bench row only)
set -uo pipefail
cd "$(dirname "$0")/.."
log_dir=${OUT:-build-cuda}
mkdir -p "$log_dir" build-cuda
exec > >(tee "$log_dir/cuda-check.log") 2>&1
step() { printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
failures=0
check() {  # check NAME CMD...: runs it, counts a failure
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; failures=$((failures + 1)); fi
}

step "machine"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.memory --format=csv || true
nproc
for tool in cmake ninja g++ nvcc node python3; do
  printf '%-8s %s\n' "$tool" "$(command -v "$tool" || echo MISSING)"
done
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

step "build (CUDA for this GPU)"
if ! cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOGLM_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=native -DAUTOGLM_PYTHON=OFF -DAUTOGLM_SANITIZER_TESTS=OFF >/dev/null; then
  echo "FAILED: configure (the missing packages are named above; scripts/install-deps.sh --build-only installs them)"
  exit 1
fi
cmake --build build-cuda -j "$(nproc)" --target autoglm test_backend test_golden || { echo "FAILED: build"; exit 1; }
cli=build-cuda/src/cli/autoglm

step "1. CUDA ops against the CPU"
check "test_backend" build-cuda/tests/test_backend --gtest_color=no

step "2. golden cases on cuda"
check "test_golden on cuda" env AUTOGLM_TEST_DEVICE=cuda build-cuda/tests/test_golden --gtest_color=no

step "3. bench (1b preset) on cuda"
models=build-cuda/bench-models
mkdir -p "$models"
types="f16 q8_0 q4_0 q4_k"
[ "${QUICK:-}" = 1 ] && types="q4_0"
for type in $types; do
  [ -f "$models/1b-$type.gguf" ] || $cli create-model --preset 1b --type "$type" -o "$models/1b-$type.gguf" >/dev/null
  check "bench $type" $cli bench --device cuda -m "$models/1b-$type.gguf" -p 512 -n 128 -r 3 -b 1,8,64
done

if [ "${QUICK:-}" != 1 ]; then
  step "4. serving at concurrency 64"
  if command -v node >/dev/null; then
    $cli serve --device cuda -m "$models/1b-q4_0.gguf" --port 18080 --max-running 64 --kv-cache-mib 8192 \
      --max-batch-tokens 2048 >"$log_dir/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 120); do curl -sf http://127.0.0.1:18080/ready >/dev/null 2>&1 && break; sleep 1; done
    check "bench_serve c=64" node bench/bench_serve.mjs --url http://127.0.0.1:18080 -n 256 -c 64 \
      --prompt-len 96 --output-len 64
    curl -s http://127.0.0.1:18080/metrics | grep -E '^autoglm_(kv_cache_usage_perc|generated_tokens_total)' || true
    kill -TERM $server
    wait $server
  else
    echo "skipped: no node on this machine"
  fi

  step "5. PyTorch side by side"
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    python3 - <<'EOF'
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
print(f"torch f16 GEMV chain of the 1b preset's matrices at batch 1: {n / (time.time() - t):.1f} steps/s")
EOF
  else
    echo "skipped: no PyTorch with CUDA here"
  fi
fi

step "done: $failures failed"
exit $((failures > 0))
