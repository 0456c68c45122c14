#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need (idempotent).
# `--build-only`: what building the server and the Python package needs, nothing for the tests
# (the container image's build stage).
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev
          libxxhash-dev libsqlite3-dev libssl-dev libboost-dev libyaml-cpp-dev libspdlog-dev
          libpng-dev libjpeg62-turbo-dev libwebp-dev  # images: PNG, JPEG, WebP
          python3-dev pybind11-dev python3-numpy)  # the Python package
if [ "${1:-}" != "--build-only" ]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev clang-format
             clang libclang-rt-dev  # clang and its libFuzzer runtime: scripts/fuzz.sh
             chromium               # real pages: CORS, the web UI (tests/clients)
             prometheus haproxy     # promtool and a Prometheus server, a load balancer (tests/deploy)
             python3-pytest python3-pytest-asyncio
             python3-pil            # Pillow: the reference of the image processors' resize (test_image_preprocess)
             python3-venv)          # `python3 -m venv` with Debian's python3 (the python_venv test)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the end-to-end tests; a Node.js that is already there (any vendor) is kept.
if [ "${1:-}" != "--build-only" ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
