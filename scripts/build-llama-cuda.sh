#!/usr/bin/env bash
# llama.cpp 2026-09 (the anchor's source: ../shared/tools/build-llama-anchor.sh) built with CUDA
# for Hopper here, packed for scripts/cuda-check.sh's "llama" step on a GPU machine that cannot
# build it in its time: static binaries (llama-bench, llama-batched-bench) and the libraries they
# load beyond glibc and CUDA's (NCCL is found on the GPU machine, beside PyTorch).
#
#   bash scripts/build-llama-cuda.sh [PACK_DIR]     (default .device; about 25 minutes on 2 cores)
#
# Never commit what it builds.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.device}
anchor=${LLAMA_ANCHOR:-$HOME/.cache/llama-anchor}
[ -d "$anchor/src" ] || bash ../shared/tools/build-llama-anchor.sh "$anchor" >/dev/null
cmake -S "$anchor/src" -B "$anchor/build-cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON \
  -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DCMAKE_CUDA_ARCHITECTURES=90-real -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER=OFF >"$anchor/build-cuda.configure.log"
nice cmake --build "$anchor/build-cuda" -j"$(nproc)" --target llama-bench llama-batched-bench >"$anchor/build-cuda.log" ||
  { tail -20 "$anchor/build-cuda.log" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$anchor/build-cuda/bin/llama-bench" "$anchor/build-cuda/bin/llama-batched-bench" "$stage/bin/"
strip "$stage"/bin/*
ldd "$stage"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libgomp* | libssl* | libcrypto*) cp -L "$lib" "$stage/lib/" ;;
  esac
done
mkdir -p "$dir"
grep -qx "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >>.git/info/exclude
tar -C "$stage" -cf - . | xz -T2 -9 >"$dir/llama-cuda.tar.xz"
echo "build-llama-cuda: $dir/llama-cuda.tar.xz ($(du -h "$dir/llama-cuda.tar.xz" | cut -f1))"
