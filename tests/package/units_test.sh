#!/usr/bin/env bash
# The systemd units the Debian packages ship (packaging/*.service, *.path), as systemd judges
# them, with no systemd running and nothing installed:
#  - `systemd-analyze security --offline=yes`: every service's overall exposure at most
#    MAX_EXPOSURE (2.5 unless given);
#  - `systemd-analyze verify` clean, in a throwaway root holding the units, stand-ins for the
#    programs they run, and this machine's targets and slices.
# Usage: units_test.sh PACKAGING_DIR [MAX_EXPOSURE]
# What the machine cannot do is a skip (exit 77, ctest's SKIP_RETURN_CODE), said on the last line.
set -euo pipefail
packaging=$(cd "$1" && pwd)
max=${2:-2.5}
fail() {
  echo "units_test: FAIL: $*" >&2
  exit 1
}
skip() {
  echo "units_test: SKIP: $*"
  exit 77
}
command -v systemd-analyze >/dev/null || skip "no systemd-analyze (Debian's systemd package)"
# --offline came with systemd 250; an older one says "unrecognized option".
if ! systemd-analyze security --offline=yes "$packaging/crosstune-tracker.service" \
  >/dev/null 2>&1; then
  out=$(systemd-analyze security --offline=yes "$packaging/crosstune-tracker.service" 2>&1 |
    head -n 1 || true)
  case "$out" in
    *unrecognized* | *"Unknown option"* | *"invalid option"*)
      skip "systemd-analyze $(systemd-analyze --version | head -n 1 | cut -d' ' -f2) has no --offline: $out"
      ;;
  esac
fi

shopt -s nullglob
services=("$packaging"/*.service)
units=("$packaging"/*.service "$packaging"/*.path)
shopt -u nullglob
[ ${#services[@]} -ge 4 ] || fail "expected the packages' 4 services in $packaging, found ${#services[@]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/crosstune-units.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. Exposure. systemd-analyze's own threshold compares a rounded 0..100 scale: the score is
# read from its "Overall exposure level" line instead.
bad=0
for unit in "${services[@]}"; do
  name=$(basename "$unit")
  if ! systemd-analyze security --offline=yes --no-pager "$unit" >"$work/security.log" 2>&1; then
    cat "$work/security.log"
    fail "systemd-analyze security $name"
  fi
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$work/security.log")
  [ -n "$score" ] || { cat "$work/security.log"; fail "no exposure level for $name"; }
  if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s > m) }'; then
    grep -E '^✗' "$work/security.log" || true
    echo "units_test: $name: exposure $score, above $max" >&2
    bad=1
  else
    echo "units_test: $name: exposure $score (at most $max)"
  fi
done
[ "$bad" = 0 ] || fail "a unit is exposed above $max (its ✗ lines above)"

# 2. verify, as the packages install them. Their programs are stand-ins here: verify only checks
# that each ExecStart's program exists and is executable.
root="$work/root"
mkdir -p "$root/lib/systemd/system" "$root/etc"
for unit in "${units[@]}"; do cp "$unit" "$root/lib/systemd/system/"; done
shopt -s nullglob
for f in /lib/systemd/system/*.target /lib/systemd/system/*.slice; do cp -P "$f" "$root/lib/systemd/system/"; done
shopt -u nullglob
[ -f "$root/lib/systemd/system/sysinit.target" ] ||
  skip "exposure ok; verify skipped: no systemd targets in /lib/systemd/system to verify against"
for prog in $(sed -n 's/^Exec[A-Za-z]*=[-+!@:]*\([^ ]*\).*/\1/p' "${units[@]}" | sort -u); do
  mkdir -p "$root$(dirname "$prog")"
  printf '#!/bin/sh\n' >"$root$prog"
  chmod +x "$root$prog"
done
for unit in "${units[@]}"; do
  name=$(basename "$unit")
  if ! systemd-analyze verify --man=no --root="$root" "$root/lib/systemd/system/$name" \
    >"$work/verify.log" 2>&1 || [ -s "$work/verify.log" ]; then
    cat "$work/verify.log"
    fail "systemd-analyze verify $name"
  fi
  echo "units_test: $name: verify clean"
done
echo "units_test: ok: ${#services[@]} services at most $max, ${#units[@]} units verified"
