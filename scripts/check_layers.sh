#!/usr/bin/env bash
# Fails when a file includes a header of a higher layer (or of a sibling on its own layer).
# The order is the "Layer order:" line of docs/ARCHITECTURE.md, lowest first, e.g.
#   Layer order: core < formats, kernels < tokenizer < ...
# A file under src/NAME/ may include src/ headers of NAME itself and of lower layers only;
# public headers (include/autoglm) may include only other public headers.
#   check_layers.sh [ROOT]   (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc="$root/docs/ARCHITECTURE.md"
order=$(grep -m1 '^Layer order:' "$doc" | sed 's/^Layer order:[[:space:]]*//; s/`//g') ||
  { echo "check_layers: no 'Layer order:' line in $doc"; exit 1; }
declare -A level
n=0
IFS='<' read -ra groups <<<"$order"
for group in "${groups[@]}"; do
  IFS=',' read -ra names <<<"$group"
  for name in "${names[@]}"; do
    name=$(echo "$name" | tr -d '[:space:]')
    [ -n "$name" ] && level[$name]=$n
  done
  n=$((n + 1))
done
failures=0
while IFS= read -r file; do
  rel=${file#"$root/src/"}
  own=${rel%%/*}
  if [ -z "${level[$own]+x}" ]; then
    echo "$file: folder '$own' is not in the layer order of $doc"
    failures=$((failures + 1))
    continue
  fi
  while IFS=: read -r line target; do
    [ "$target" = "$own" ] && continue
    [ "$target" = "autoglm" ] && continue  # the public API: every layer may use it
    [ -z "${level[$target]+x}" ] && continue  # not one of ours (a system header path)
    if [ "${level[$target]}" -ge "${level[$own]}" ]; then
      echo "$file:$line: $own (layer ${level[$own]}) includes $target/ (layer ${level[$target]})"
      failures=$((failures + 1))
    fi
  done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$file" |
           sed -E 's/^([0-9]+):.*"([a-z_]+)\//\1:\2/')
done < <(find "$root/src" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) | sort)
while IFS=: read -r file line text; do
  echo "$file:$line: a public header includes a non-public header: $text"
  failures=$((failures + 1))
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' -r "$root/include" | grep -v '"autoglm/' || true)
# The Python bindings bind the public API only (their own headers aside).
while IFS=: read -r file line text; do
  echo "$file:$line: the Python bindings include a non-public header: $text"
  failures=$((failures + 1))
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' -r "$root/python/src" 2>/dev/null |
         grep -v '"autoglm/' || true)
if [ "$failures" -gt 0 ]; then
  echo "check_layers: $failures upward or sideways include(s)"
  exit 1
fi
echo "check_layers: every include goes down the layer order ($order)"
