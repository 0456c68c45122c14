#!/usr/bin/env bash
# The layering check passes on the tree and fails on planted upward and sideways includes.
#   layering_test.sh SOURCE_DIR
set -euo pipefail
src=$1
check="$src/scripts/check_layers.sh"
bash "$check" "$src" >/dev/null || { echo "FAIL: the tree itself does not pass"; bash "$check" "$src"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plant() {  # plant FILE INCLUDE EXPECTED: the check must fail and name the file and the layers
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  cp -r "$src/src" "$src/include" "$src/docs" "$work/tree/"
  sed -i "1i #include \"$2\"" "$work/tree/$1"
  if out=$(bash "$check" "$work/tree" 2>&1); then
    echo "FAIL: '#include \"$2\"' in $1 was not caught"; exit 1
  fi
  grep -q "$1:1: $3" <<<"$out" || { echo "FAIL: unexpected report for $1:"; echo "$out"; exit 1; }
}
plant src/core/dtype.cpp server/api.h "core (layer 0) includes server/ (layer 13)"
plant src/formats/gguf.cpp kernels/cpu/matmul.h "formats (layer 1) includes kernels/ (layer 1)"
plant src/engine/engine.cpp runtime/runtime_parts.h "engine (layer 5) includes runtime/ (layer 6)"
plant include/autoglm/runtime.h engine/engine.h "a public header includes a non-public header"
# The CLI goes through the public API (bench aside).
plant src/cli/cmd_run.cpp model/model.h "the CLI includes a header below the public API"
# So does the server: the runtime's internals are not its to reach.
plant src/server/generation_routes.cpp runtime/runtime_parts.h "the server includes a header below the public API"
# The server's folders are layers of their own: jobs below the HTTP transport.
plant src/server/jobs/hmac.cpp server/http/route_table.h "server/jobs (layer 9) includes server/http/ (layer 12)"
# A unit cycle: a header of one folder including a unit that already includes it.
rm -rf "$work/tree"
mkdir -p "$work/tree"
cp -r "$src/src" "$src/include" "$src/docs" "$work/tree/"
grep -q '#include "server/jobs/async_jobs.h"' "$work/tree/src/server/jobs/batches.h" ||
  { echo "FAIL: the planted cycle needs server/jobs/batches.h to include server/jobs/async_jobs.h"; exit 1; }
sed -i '1i #include "server/jobs/batches.h"' "$work/tree/src/server/jobs/async_jobs.cpp"
if out=$(bash "$check" "$work/tree" 2>&1); then
  echo "FAIL: the unit cycle async_jobs -> batches -> async_jobs was not caught"; exit 1
fi
grep -qx "src/server/jobs: units form a cycle: async_jobs -> batches -> async_jobs" <<<"$out" ||
  { echo "FAIL: unexpected report for the unit cycle:"; echo "$out"; exit 1; }
echo "layering: the tree passes; 7 planted includes and a planted unit cycle are caught"
