#!/usr/bin/env bash
# Fails when a C++ or CUDA file of src/, tests/, include/, examples/, bench/ or fuzz/ differs from clang-format's
# output (.clang-format). Fix with: clang-format -i FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'src/*.inc' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tests/*.h' 'include/*.h' \
                                  'examples/*.cpp' 'bench/*.cpp' 'fuzz/*.cpp')
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check_format: the files above are not clang-formatted"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
