#!/usr/bin/env bash
# Packs what scripts/cuda-check.sh needs on a GPU machine that cannot build this project (no
# yaml-cpp, spdlog... there): the binaries of a CUDA build made here, the shared libraries they
# need beyond glibc, libstdc++ and CUDA's own, and the part of ../shared the checks read.
#
#   bash scripts/cuda-pack.sh [BUILD_DIR] [PART]     (default: build, all)
#
# Writes $CUDA_PACK_DIR/pack.tar.xz (default .device, git-ignored through .git/info/exclude).
# PART picks the models: "all", "1" / "2" (two halves, for a machine whose upload is capped: 64
# MiB where this was first run) or "none" (benchmarks only: they make their own models);
# cuda-check.sh runs the golden cases whose model came along and skips the rest, saying which.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
part=${2:-all}
shared=${AUTOGLM_SHARED_DIR:-../shared}
for f in src/cli/autoglm tests/test_backend tests/test_golden; do
  [ -x "$build/$f" ] || { echo "cuda-pack: $build/$f missing: build the autoglm, test_backend and test_golden targets" >&2; exit 1; }
done
grep -q 'AUTOGLM_CUDA:BOOL=ON' "$build/CMakeCache.txt" || { echo "cuda-pack: $build is not a CUDA build (-DAUTOGLM_CUDA=ON)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/shared/golden" "$stage/shared/models/random"
cp "$build/src/cli/autoglm" "$build/tests/test_backend" "$build/tests/test_golden" "$stage/bin/"
strip "$stage"/bin/*  # the upload is what is short, not symbols

# Every library the binaries load from outside glibc, the C++ runtime and the CUDA toolkit.
ldd "$stage"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libstdc++* | libgcc_s* | ld-linux*) ;;
    libcuda* | libcublas* | libcudart*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done

# The models: part 1 the float ones and the models of the engine tests, part 2 the block types.
part1="llama-2-tiny-random.gguf stories260K.gguf random/rand-llama-gqa.gguf random/rand-llama-tied.gguf
  random/rand-llama-gqa-f16.gguf random/rand-llama-gqa-bf16.gguf random/rand-qwen3.gguf random/rand-glm4.gguf
  random/rand-llama-headdim.gguf"
part2="random/rand-llama-gqa-q4_0.gguf random/rand-llama-gqa-q4_1.gguf random/rand-llama-gqa-q4_k.gguf
  random/rand-llama-gqa-q5_0.gguf random/rand-llama-gqa-q5_1.gguf random/rand-llama-gqa-q5_k.gguf
  random/rand-llama-gqa-q6_k.gguf random/rand-llama-gqa-q8_0.gguf random/rand-qwen2.gguf random/rand-chatglm.gguf"
case "$part" in
  1) models=$part1 ;;
  2) models=$part2 ;;
  all) models="$part1 $part2" ;;
  none) models="" ;;
  *) echo "cuda-pack: PART is 1, 2, all or none, not '$part'" >&2; exit 1 ;;
esac
for m in $models; do cp "$shared/models/$m" "$stage/shared/models/$m"; done
cp "$shared/golden/index.json" "$stage/shared/golden/"
# The golden cases of the models that came along (their logits and case files).
/usr/bin/python3 - "$shared" "$stage/shared" <<'EOF'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for case in json.load(open(os.path.join(src, "golden/index.json")))["cases"]:
    if os.path.exists(os.path.join(dst, case["model"])):
        shutil.copytree(os.path.join(src, "golden", case["dir"]), os.path.join(dst, "golden", case["dir"]))
EOF

dir=${CUDA_PACK_DIR:-.device}
mkdir -p "$dir"
grep -qx "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >>.git/info/exclude
tar -C "$stage" -cf - . | xz -T2 -9 >"$dir/pack.tar.xz"
echo "cuda-pack: $dir/pack.tar.xz ($(du -h "$dir/pack.tar.xz" | cut -f1); part $part; libraries: $(ls "$stage/lib" | tr '\n' ' '))"
