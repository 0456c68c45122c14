#!/usr/bin/env bash
# `pip install ./python` into a fresh `python3 -m venv` (python3 on PATH, or $AUTOGLM_VENV_PYTHON): offline
# (--no-index; the build backend needs nothing from PyPI), then the package imports there, from the venv,
# and generates 8 tokens without numpy; `pip uninstall` then removes it (its RECORD is right).
# BUILD_DIR is reused as is when its Python has the venv's extension suffix (the output says whether).
#   python_venv_test.sh BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
build=$1 src=$2 shared=$3
python=${AUTOGLM_VENV_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$python" -m venv "$work/venv" >"$work/venv.log" 2>&1 ||
  fail "'$python -m venv' failed (Debian's python3 needs the python3-venv package): $(cat "$work/venv.log")"
venv=$work/venv/bin/python
echo "venv: $("$venv" -c 'import sys; print(sys.version.split()[0], "from", sys._base_executable)')"
"$venv" -m pip --version >/dev/null 2>&1 || fail "the venv has no pip (Debian: python3-venv brings it)"
if ! AUTOGLM_BUILD_DIR=$build "$venv" -m pip install -v --no-index --disable-pip-version-check "$src/python" \
     >"$work/pip.log" 2>&1; then
  tail -40 "$work/pip.log"
  fail "pip install $src/python failed"
fi
grep -q "Successfully installed openautoglm" "$work/pip.log" || { tail -20 "$work/pip.log"; fail "pip did not install openautoglm"; }
# What the backend decided: the build folder reused as is, or one of its own for this ABI.
grep -E "openautoglm build: (reusing|configuring|building in|AUTOGLM_BUILD_DIR=)" "$work/pip.log" | sed 's/^ *//'
if grep -q "openautoglm build: reusing" "$work/pip.log"; then
  ext=$(sed -n 's/^ *openautoglm build: extension: //p' "$work/pip.log")
  [ -n "$ext" ] && [ "$(dirname "$ext")" = "$build/python/openautoglm" ] || fail "reused, but the extension came from '$ext'"
fi
mkdir "$work/elsewhere"  # not the checkout: only the venv's copy can be imported
out=$(cd "$work/elsewhere" && "$venv" -c '
import importlib.util, sys
import openautoglm
assert openautoglm.__file__.startswith(sys.prefix), (openautoglm.__file__, sys.prefix)
assert sys.prefix != sys.base_prefix
m = openautoglm.AutoModelForCausalLM.from_pretrained(sys.argv[1], threads=1, kv_memory_mib=16)
ids = m.tokenizer("Once upon a time").input_ids
out = m.generate(ids, max_new_tokens=8)
assert len(out) == len(ids) + 8, (len(ids), out)
numpy = "numpy absent" if importlib.util.find_spec("numpy") is None else "numpy present"
assert "numpy" not in sys.modules, "generation imported numpy"
print(openautoglm.__file__, "|", numpy, "|", m.tokenizer.decode(out, skip_special_tokens=True))
' "$shared/models/stories260K.gguf")
case "$out" in
  *"Once upon a time, there was"*) echo "python_venv: $out" ;;
  *) fail "generated '$out'" ;;
esac
"$venv" -m pip uninstall -y --disable-pip-version-check openautoglm >"$work/uninstall.log" 2>&1 || fail "pip uninstall: $(cat "$work/uninstall.log")"
if (cd "$work/elsewhere" && "$venv" -c 'import openautoglm' 2>/dev/null); then fail "openautoglm still imports after pip uninstall"; fi
left=$(find "$work/venv" -path '*openautoglm*' ! -name '*.pyc' ! -type d | head -5)
[ -z "$left" ] || fail "pip uninstall left: $left"
echo "python_venv: installed, imported, generated and uninstalled in a fresh venv"
