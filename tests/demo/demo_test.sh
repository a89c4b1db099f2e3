#!/usr/bin/env bash
# Runs the README's first command, scripts/demo.sh, as a user would, and checks its table: one
# row (or more) per expected device, its kernel check (column 7) and its model check (the column
# before the last) both "ok", the BERT-style encoder's check (the last column) "ok" on the local
# device and on one board (and "-" where it did not run), the demo building the cross servers it found as build targets, its early
# first-result line and its time by step.
#   demo_test.sh SOURCE_DIR DEVICE...      (e.g. local qemu-aarch64 qemu-armhf)
set -uo pipefail
src=$1
shift
# With SIGPIPE at its default, as in a terminal (ctest starts tests with it ignored, which hides
# failures that come from it).
out=$(env --default-signal=PIPE bash "$src/scripts/demo.sh" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "demo_test: FAIL: $*" >&2
  exit 1
}
[ "$rc" -eq 0 ] || fail "scripts/demo.sh exited with $rc"

# The table: the lines after the header whose first column is "device".
table=$(awk 'seen && NF { print } $1 == "device" { seen = 1 }' <<<"$out")
[ -n "$table" ] || fail "no table in the demo's output"
for dev in "$@"; do
  rows=$(awk -v d="$dev" '$1 == d' <<<"$table")
  [ -n "$rows" ] || fail "no row for device $dev"
  bad=$(awk '$7 != "ok" || $(NF - 1) != "ok" || ($NF != "ok" && $NF != "-")' <<<"$rows")
  [ -z "$bad" ] || fail "device $dev: a row without ok: $bad"
  case $dev in
    qemu-*)
      # A cross server must come from the demo's own build step (its target was detected),
      # not from a binary an earlier build left behind.
      target=crosstune-server-${dev#qemu-}
      grep -q "^demo: building .*\\b$target\\b" <<<"$out" ||
        fail "the demo did not build $target (target detection)"
      ;;
  esac
done
bert_rows=$(awk '$NF == "ok" { print $1 }' <<<"$table")
grep -qx local <<<"$bert_rows" || fail "the BERT-style encoder did not run on the local device"
if [ $# -gt 1 ]; then
  grep -q '^qemu-' <<<"$bert_rows" || fail "the BERT-style encoder did not run on a board"
fi
# The first result comes from the local device before the boards and the model (its own line),
# and every step says how long it took.
grep -qE '^demo: first result: local matmul .* GFLOP/s tuned' <<<"$out" ||
  fail "no 'demo: first result' line for the local device"
grep -qE '^demo: time by step: .*; total [0-9]+ s$' <<<"$out" || fail "no 'demo: time by step' line"
echo "demo_test: ok ($*)"
