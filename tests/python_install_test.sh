#!/usr/bin/env bash
# The Python package as `cmake --install build --component python` lays it out (into a
# DESTDIR here, not the system): importable from there alone, and it generates.
#   python_install_test.sh BUILD_DIR PYTHON SHARED_DIR
set -euo pipefail
build=$1 python=$2 shared=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DESTDIR="$work" cmake --install "$build" --component python >/dev/null
site=$(dirname "$(find "$work" -name __init__.py -path '*openautoglm*' | head -1)")
[ -f "$site/_core"*.so ] || { echo "FAIL: no extension module under $site"; exit 1; }
[ -f "$site/__init__.pyi" ] || { echo "FAIL: no type stubs under $site"; exit 1; }
out=$(cd "$work" && PYTHONPATH="$(dirname "$site")" "$python" -c '
import sys, openautoglm
assert openautoglm.__file__.startswith(sys.argv[1]), openautoglm.__file__
m = openautoglm.AutoModelForCausalLM.from_pretrained(sys.argv[2], threads=1, kv_memory_mib=16)
print(m.tokenizer.decode(m.generate("Once upon a time", max_new_tokens=8), skip_special_tokens=True))
' "$work" "$shared/models/stories260K.gguf")
case "$out" in *"Once upon a time, there was"*) echo "python_installed: $out" ;; *) echo "FAIL: generated '$out'"; exit 1 ;; esac
