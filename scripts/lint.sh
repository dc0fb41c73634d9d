#!/usr/bin/env bash
# Style checks.  scripts/lint.sh --format   clang-format, no changes allowed (run in CI)
#                scripts/lint.sh --fix      rewrite files with clang-format
#                scripts/lint.sh --tidy     clang-tidy over build/compile_commands.json (slow)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:---format}"
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' 2>/dev/null || find common engine agent controller tools tests -name '*.h' -o -name '*.cc' -o -name '*.cu')
case "$mode" in
  --format)
    clang-format --dry-run -Werror "${files[@]}"
    echo "lint: clang-format clean (${#files[@]} files)" ;;
  --fix)
    clang-format -i "${files[@]}" ;;
  --tidy)
    [ -f build/compile_commands.json ] || bash scripts/build.sh build
    mapfile -t ccs < <(printf '%s\n' "${files[@]}" | grep -E '\.cc$')
    clang-tidy -p build --quiet "${ccs[@]}" ;;
  *) echo "usage: scripts/lint.sh [--format|--fix|--tidy]" >&2; exit 2 ;;
esac
