#!/usr/bin/env bash
# Installs the openautoglm Python package into the interpreter you run:
# $PYTHON if set, else `python3` on PATH (pyenv, a venv, conda, or Debian's /usr/bin/python3).
#   bash scripts/install-python.sh                      # python3 on PATH
#   PYTHON=/path/to/python bash scripts/install-python.sh
# build/ is configured (and built) by scripts/build.sh first if it is not yet; a configured one is left as it is.
# The build's own interpreter (Debian's /usr/bin/python3): `cmake --install build --component python`
# (/usr/local/lib/python3.X/dist-packages). Any other: `$PYTHON -m pip install --no-index ./python`, whose
# build backend (python/build_backend, nothing from PyPI) reuses build/ when that interpreter has the same
# extension ABI, else builds _core against that interpreter's headers in build/python-<ABI>.
# Debian packages only (scripts/install-deps.sh); no PyPI.
set -euo pipefail
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "install-python: no '$python' found (set PYTHON=/path/to/python)" >&2; exit 1; }
# The interpreter that really runs (a pyenv shim resolved, a relative path made absolute; a venv's own python).
python=$("$python" -c 'import sys; print(sys.executable)')
cd "$(dirname "$0")/.."
identity='import os, sys; print(os.path.realpath(sys.executable), sys.prefix)'
if [ -f build/CMakeCache.txt ]; then  # configured: its configuration stays as it is; only the package builds
  bash scripts/install-deps.sh --build-only
else
  bash scripts/build.sh  # configures and builds build/ (as scripts/serve.sh and scripts/test.sh do)
fi
built_for=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt)
if [ -n "$built_for" ] && [ "$("$built_for" -c "$identity")" = "$("$python" -c "$identity")" ]; then
  echo "install-python: $python is the build's interpreter: cmake --install build --component python"
  cmake --build build --target _core openautoglm_python
  cmake --install build --component python
else
  "$python" -m pip --version >/dev/null 2>&1 ||
    { echo "install-python: $python has no pip ('$python -m ensurepip', or Debian's python3-pip)" >&2; exit 1; }
  echo "install-python: $python is not the build's interpreter ($built_for): $python -m pip install ./python"
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  # -v: the backend says which build folder it used (and CMake's output is in the log on a failure).
  if ! AUTOGLM_BUILD_DIR=$PWD/build "$python" -m pip install -v --no-index --disable-pip-version-check ./python >"$log" 2>&1; then
    grep -E "FAILED:|error:|Error:|CMake Error" "$log" | head -30 || true
    tail -15 "$log"
    echo "install-python: pip install ./python failed (the whole log: $python -m pip install -v ./python)" >&2
    exit 1
  fi
  grep -E "openautoglm build: (reusing|configuring|building in|extension|AUTOGLM_BUILD_DIR=)|Successfully installed" "$log" | sed 's/^ *//'
fi
cd /  # not the checkout: its python/openautoglm must not be what imports
"$python" -c 'import sys, openautoglm; print("openautoglm", openautoglm.__version__, "installed for", sys.executable + ":", openautoglm.__file__)'
