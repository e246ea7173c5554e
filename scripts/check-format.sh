#!/usr/bin/env bash
# check-format.sh - fails (exit 1) when a tracked C++ file differs from what clang-format makes of
# it with the committed .clang-format, and names each such file. `--fix` formats them instead.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/install-deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted with .clang-format ($(clang-format --version | head -n1)):"
  printf '  %s\n' "${bad[@]}"
  echo "check-format: run scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
