#!/usr/bin/env bash
# Style and bug-finding checks on C/C++ code:
#   clang-format  changed lines (or, with --all, every tracked file) as .clang-format says
#   clang-tidy    .clang-tidy's checks (bugprone, concurrency, cert, ...) on the changed sources
#                 (needs build/default's compile_commands.json; skipped with a note without it)
#   lizard        no function in tuner/src over 80 lines (its kernel templates aside), in every
#                 mode (needs the Python venv of scripts/install-deps.sh; skipped with a note)
# "Changed" is against BASE: the argument, else $CROSSTUNE_STYLE_BASE, else the merge base with
# origin/main (main) when HEAD is ahead of it, else HEAD's parent (the last commit, as CI on main
# sees it). Exits non-zero on a deviation or a finding.
#   scripts/check-style.sh [BASE] [--no-tidy] [--all]
set -euo pipefail
cd "$(dirname "$0")/.."
base=
tidy=1
all=0
for a in "$@"; do
  case $a in
    --no-tidy) tidy=0 ;;
    --all) all=1 ;;
    *) base=$a ;;
  esac
done
base=${base:-${CROSSTUNE_STYLE_BASE:-}}
if [ -z "$base" ]; then
  for b in origin/main main; do
    if git rev-parse -q --verify "$b" >/dev/null; then
      mb=$(git merge-base "$b" HEAD 2>/dev/null || true)
      if [ -n "$mb" ] && [ "$mb" != "$(git rev-parse HEAD)" ]; then
        base=$mb
        break
      fi
    fi
  done
fi
if [ -z "$base" ] && git rev-parse -q --verify HEAD~1 >/dev/null; then base=HEAD~1; fi
status=0

if [ "$all" = 1 ]; then
  mapfile -t every < <(git ls-files '*.c' '*.cc' '*.h')
  if ! clang-format-14 --dry-run --Werror "${every[@]}" 2>/tmp/check-style-format.$$; then
    grep -E "^[^ ]+:[0-9]+:[0-9]+: " /tmp/check-style-format.$$ | cut -d: -f1 | sort -u |
      sed 's/^/check-style: not formatted: /' >&2
    echo "check-style: run clang-format-14 -i on the files above" >&2
    status=1
  fi
  rm -f /tmp/check-style-format.$$
fi

# A long function is a plan whose steps have no names: the tuner's stay short enough to read on
# one screen (TuneJob::Run is its steps). Lizard measures each function from its first line to
# its closing brace; the templates are kernel source held in strings, not code of ours to split.
lizard=${CROSSTUNE_PYTHON_VENV:-/opt/crosstune/python-venv}/bin/lizard
if [ ! -x "$lizard" ]; then
  echo "check-style: no $lizard (scripts/install-deps.sh python); function lengths not checked" >&2
elif ! "$lizard" --languages cpp --length 80 --CCN 1000000 --arguments 1000 --warnings_only \
  --exclude 'tuner/src/templates/*' tuner/src; then
  echo "check-style: the functions above are over 80 lines: split them into named steps" >&2
  status=1
fi

if [ -z "$base" ]; then
  echo "check-style: no base commit to compare with (a shallow clone?); clang-tidy skipped"
  exit $status
fi
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.c' '*.cc' '*.h')
if [ ${#files[@]} -eq 0 ]; then
  echo "check-style: no C/C++ files changed since $(git rev-parse --short "$base")"
  exit $status
fi
if [ "$all" = 0 ]; then
  format_diff=$(git clang-format-14 --binary clang-format-14 --diff "$base" -- "${files[@]}" || true)
  if [ -n "$format_diff" ] &&
    ! grep -q "^no modified files to format\|^clang-format did not modify any files" <<<"$format_diff"; then
    printf '%s\n' "$format_diff"
    echo "check-style: formatting differs from .clang-format (run: git clang-format-14 $base)" >&2
    status=1
  fi
fi
if [ "$tidy" = 1 ]; then
  db=build/default/compile_commands.json
  if [ ! -f "$db" ]; then
    echo "check-style: no $db; configure first (cmake --preset default) to run clang-tidy" >&2
  else
    # The unity build's database names its batches, not their sources: one that names each
    # source of a batch with the batch's flags (scripts/unity-compile-db.py).
    tidy_db=$(mktemp -d)
    python3 scripts/unity-compile-db.py build/default "$tidy_db" >/dev/null
    sources=()
    for f in "${files[@]}"; do
      case $f in
        *.cc | *.c) grep -q "\"file\": \"[^\"]*/$f\"" "$tidy_db/compile_commands.json" && sources+=("$f") ;;
      esac
    done
    if [ ${#sources[@]} -gt 0 ]; then
      echo "check-style: clang-tidy on ${#sources[@]} changed source(s) since $(git rev-parse --short "$base")"
      printf '%s\n' "${sources[@]}" |
        xargs -P "$(nproc)" -n 1 clang-tidy-14 -p "$tidy_db" --quiet --warnings-as-errors='*' ||
        status=1
    fi
    rm -rf "$tidy_db"
  fi
fi
exit $status
