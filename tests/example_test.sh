#!/usr/bin/env bash
# The public package as a user gets it: install the build into a fresh prefix, build
# examples/ against that prefix alone (find_package(autoglm); no src/ include path), and
# check that the example program generates the golden stories260K text.
#   example_test.sh BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
build=$1 src=$2 shared=$3
model="$shared/models/stories260K.gguf"
golden="$shared/golden/stories260k-once/case.json"
[ -f "$model" ] && [ -f "$golden" ] || { echo "FAIL: $model or $golden is missing"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
if grep -rq '"\(core\|engine\|model\|server\|runtime\|chat\)/' "$work/prefix/include"; then
  echo "FAIL: an installed header includes a src/ header"; exit 1
fi
cmake -S "$src/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/examples" >/dev/null
if grep -q -- "-I$src/src\|$src/src" "$work/examples/build.ninja"; then
  echo "FAIL: the example build sees src/"; exit 1
fi
expected=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1])).greedy.output_text)' "$golden")
actual=$("$work/examples/generate" "$model" "Once upon a time" 64 2>"$work/stderr")
if [ "$actual" != "$expected" ]; then
  echo "FAIL: the example generated"; printf '%s\n' "$actual"; echo "expected"; printf '%s\n' "$expected"
  cat "$work/stderr"; exit 1
fi
grep -q "length: 5 prompt tokens, 64 generated" "$work/stderr" || { echo "FAIL: unexpected summary"; cat "$work/stderr"; exit 1; }
echo "example: installed package builds and generates the golden text"
