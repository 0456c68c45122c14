#!/usr/bin/env bash
# Builds the project and installs the openautoglm Python package into the system Python
# (Debian: /usr/local/lib/python3.11/dist-packages). Debian packages only; no PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cmake --install build --component python
/usr/bin/python3 -c 'import openautoglm; print("openautoglm", openautoglm.__version__, "installed:", openautoglm.__file__)'
