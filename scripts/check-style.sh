#!/usr/bin/env bash
# Checks the C/C++ files a branch changed against BASE (default: origin/main, else main):
#   clang-format  the changed lines must be formatted as .clang-format says
#   clang-tidy    .clang-tidy's bug-finding checks on the changed sources (needs build/default's
#                 compile_commands.json; skipped with a note when it is missing)
# Exits non-zero on a deviation or a finding. Usage: scripts/check-style.sh [BASE] [--no-tidy]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
tidy=1
[ "${2:-}" = --no-tidy ] && tidy=0
[ "$base" = --no-tidy ] && { tidy=0; base=; }
if [ -z "$base" ]; then
  base=main
  git rev-parse -q --verify origin/main >/dev/null && base=origin/main
fi
merge_base=$(git merge-base "$base" HEAD)
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$merge_base" -- '*.c' '*.cc' '*.h')
if [ ${#files[@]} -eq 0 ]; then
  echo "check-style: no C/C++ files changed since $base"
  exit 0
fi
status=0
format_diff=$(git clang-format-14 --binary clang-format-14 --diff "$merge_base" -- "${files[@]}" || true)
if [ -n "$format_diff" ] && ! grep -q "^no modified files to format\|^clang-format did not modify any files" <<<"$format_diff"; then
  printf '%s\n' "$format_diff"
  echo "check-style: formatting differs from .clang-format (run: git clang-format-14 $merge_base)" >&2
  status=1
fi
if [ "$tidy" = 1 ]; then
  db=build/default/compile_commands.json
  if [ ! -f "$db" ]; then
    echo "check-style: no $db; configure first (cmake --preset default) to run clang-tidy" >&2
  else
    sources=()
    for f in "${files[@]}"; do
      case $f in *.cc | *.c) grep -q "\"file\": \"[^\"]*/$f\"" "$db" && sources+=("$f") ;; esac
    done
    if [ ${#sources[@]} -gt 0 ]; then
      clang-tidy-14 -p build/default --quiet --warnings-as-errors='*' "${sources[@]}" || status=1
    fi
  fi
fi
exit $status
