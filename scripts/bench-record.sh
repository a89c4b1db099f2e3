#!/usr/bin/env bash
# Runs a benchmark and records its JSON, with this machine's CPU (lscpu) and the date, as a file
# under docs/benchmarks/data/ that the documentation's benchmark tables are made from.
#   scripts/bench-record.sh crosstune-bench-rpc --mib 256 --rounds 3
#   scripts/bench-record.sh /opt/crosstune/tvm-venv/bin/python bench/tvm_tracker_bench.py \
#       --tracker-bin build/default/tracker/crosstune-tracker
# A bench named without a path is taken from $CROSSTUNE_BUILD_DIR/bench (build/default/bench).
# Run it on a quiet machine: the figures are only as good as the machine was idle.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bench=$1
shift
if [[ "$bench" != */* ]]; then
  build="${CROSSTUNE_BUILD_DIR:-$root/build/default}"
  bench="$build/bench/$bench"
  # The tree's benchmark builds with the tree's worker, named explicitly (the builder itself finds
  # only an installed one).
  export CROSSTUNE_BUILD_WORKER="${CROSSTUNE_BUILD_WORKER:-$build/build_worker/crosstune-build-worker}"
fi
exec python3 "$root/scripts/bench-tables.py" record --out "$root/docs/benchmarks/data" -- \
  "$bench" "$@"
