#!/usr/bin/env bash
# Fails when a file includes a header of a higher layer (or of a sibling on its own layer).
# The order is the "Layer order:" line of docs/ARCHITECTURE.md, lowest first, e.g.
#   Layer order: core < formats, kernels < tokenizer < ...
# A file under src/NAME/ may include src/ headers of NAME itself and of lower layers only (a
# sub-folder named in the order, such as server/api, is a layer of its own);
# public headers (include/autoglm) may include only other public headers; src/cli (bench aside)
# only public, cli/ and core/ headers; src/server only public, server/, core/ and tasks/ ones.
# Within one folder, units (foo.h + foo.cpp, with foo.inc, foo.cu, foo.cuh: a path without its
# extension) must not include each other in a cycle: "x/y.h" included makes a file's unit depend
# on unit x/y.
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
# The layer of a path under src/: its folder NAME, or NAME/SUB when the order names that
# sub-folder (src/server/api/reply.h is in server/api; src/server/api.h in server).
layer_of() {
  local first=${1%%/*} rest=${1#*/}
  layer=$first
  if [[ $rest == */* ]] && [ -n "${level[$first/${rest%%/*}]+x}" ]; then layer=$first/${rest%%/*}; fi
}
while IFS= read -r file; do
  rel=${file#"$root/src/"}
  layer_of "$rel"
  own=$layer
  if [ -z "${level[$own]+x}" ]; then
    echo "$file: folder '$own' is not in the layer order of $doc"
    failures=$((failures + 1))
    continue
  fi
  while IFS=: read -r line path; do
    layer_of "$path"
    target=$layer
    [ "$target" = "$own" ] && continue
    [ "$target" = "autoglm" ] && continue  # the public API: every layer may use it
    [ -z "${level[$target]+x}" ] && continue  # not one of ours (a system header path)
    if [ "${level[$target]}" -ge "${level[$own]}" ]; then
      echo "$file:$line: $own (layer ${level[$own]}) includes $target/ (layer ${level[$target]})"
      failures=$((failures + 1))
    fi
  done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/[^"]*"' "$file" |
           sed -E 's/^([0-9]+):.*"([^"]+)"$/\1:\2/')
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
# The CLI and the server are clients of the public API: their files include public (autoglm/),
# their own (cli/, server/), core/ and (the server) tasks/ headers only; bench (cmd_bench*,
# bench_*), which measures the model and kernels below the API, is the exception.
while IFS=: read -r file line text; do
  case "$(basename "$file")" in cmd_bench* | bench_*) continue ;; esac
  echo "$file:$line: the CLI includes a header below the public API: $text"
  failures=$((failures + 1))
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' -r "$root/src/cli" 2>/dev/null |
         grep -vE '"(autoglm|cli|core)/' || true)
while IFS=: read -r file line text; do
  echo "$file:$line: the server includes a header below the public API: $text"
  failures=$((failures + 1))
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' -r "$root/src/server" 2>/dev/null |
         grep -vE '"(autoglm|server|core|tasks)/' || true)
# Unit cycles: one depth-first walk over the units' graph (units and their edges in sorted
# order); every edge back to a unit on the walk's path is reported as the cycle it closes.
cycles=$(cd "$root/src" &&
  find . -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
  xargs -0 grep -HoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' |
  sed -E 's|^\./||; s|^([^:]+):.*"([^"]+)"$|\1 \2|' | LC_ALL=C sort -u |
  awk '
    function unit(p) { sub(/\.[^.\/]*$/, "", p); return p }
    function folder(p) { if (p !~ /\//) return "."; sub(/\/[^\/]*$/, "", p); return p }
    function name(p) { sub(/^.*\//, "", p); return p }
    {
      a = unit($1); b = unit($2)
      if (a == b || folder(a) != folder(b) || ((a, b) in edge)) next
      edge[a, b] = 1
      if (!(a in n_out)) { units[++n_units] = a; n_out[a] = 0 }
      out[a, ++n_out[a]] = b
    }
    # The cycle path_unit[from..depth] -> path_unit[from], told from its first unit by name.
    function report(from,   k, j, first, text) {
      k = depth - from + 1; first = 0
      for (j = 0; j < k; j++) if (path_unit[from + j] < path_unit[from + first]) first = j
      text = name(path_unit[from + first])
      for (j = 1; j <= k; j++) text = text " -> " name(path_unit[from + (first + j) % k])
      print "src/" folder(path_unit[from]) ": units form a cycle: " text
    }
    function visit(u,   i, j, v) {
      state[u] = 1; path_unit[++depth] = u
      for (i = 1; i <= n_out[u]; i++) {
        v = out[u, i]
        if (state[v] == 1) {
          for (j = depth; path_unit[j] != v; j--) {}
          report(j)
        } else if (!state[v]) visit(v)
      }
      depth--; state[u] = 2
    }
    END { for (i = 1; i <= n_units; i++) if (!state[units[i]]) visit(units[i]) }')
n_cycles=0
if [ -n "$cycles" ]; then
  echo "$cycles"
  n_cycles=$(wc -l <<<"$cycles")
fi
if [ "$failures" -gt 0 ] || [ "$n_cycles" -gt 0 ]; then
  echo "check_layers: $failures upward or sideways include(s), $n_cycles cycle(s) between the units of a folder"
  exit 1
fi
echo "check_layers: every include goes down the layer order ($order); no units of one folder include each other in a cycle"
