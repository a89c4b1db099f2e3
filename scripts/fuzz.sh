#!/usr/bin/env bash
# Builds the libFuzzer targets optimized (the `fuzz` preset, build/fuzz: clang-14, ASan + UBSan
# at -O2, only the targets and the libraries they link; CI runs the same targets briefly in the
# -O0 asan tree) and runs each one long on its seed corpus. New inputs go to
# build/fuzz/fuzz/long/<target>/, crashes to build/fuzz/fuzz/crashes/.
#   scripts/fuzz.sh                  every target, 600 s each
#   FUZZ_SECONDS=60 scripts/fuzz.sh fuzz_frame fuzz_npy
#   FUZZ_RUNS=10000000 scripts/fuzz.sh fuzz_npy   stop after N executions (or FUZZ_SECONDS, first)
# Each target's last lines ("stat::number_of_executed_units: N", "stat::average_exec_per_sec: N")
# are the executions it ran and their rate.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The build trees (main, asan, tsan, the ARM servers, this one) outgrow ccache's default 5 GB.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
seconds=${FUZZ_SECONDS:-600}
runs=${FUZZ_RUNS:--1}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_frame fuzz_npy fuzz_json fuzz_params fuzz_package fuzz_constraint fuzz_records
    fuzz_kt_cache fuzz_target fuzz_tvm_tracker fuzz_scheduler fuzz_graph fuzz_tvm_params
    fuzz_module_table fuzz_farm_records)
fi
out=build/fuzz/fuzz
mkdir -p "$out/crashes"
for t in "${targets[@]}"; do
  mkdir -p "$out/long/$t"
  echo "== $t (${seconds} s)"
  # The target's own flags (time-out, memory, -max_len), as fuzz/CMakeLists.txt wrote them.
  read -r -a flags <"$out/$t.flags"
  "$out/$t" -max_total_time="$seconds" -runs="$runs" "${flags[@]}" \
    -print_final_stats=1 -artifact_prefix="$out/crashes/$t-" \
    "$out/long/$t" "fuzz/corpus/$t" 2>&1 | grep -E '^(stat::(number_of_executed_units|average_exec_per_sec)|==[0-9]+==ERROR|SUMMARY)' || true
done
