#!/usr/bin/env bash
# Installs the dependencies, builds everything with the default preset (Ninja, ccache) — the host
# tools, the aarch64/armhf servers for the qemu tests, the tests and benchmarks — and runs ctest.
# ctest's summary line ("100% tests passed, 0 tests failed out of N") is the last line printed, so a
# run that tested nothing shows at a glance.
#   scripts/test.sh                 every test
#   scripts/test.sh -L unit         extra arguments go to ctest (-L qemu, -LE slow, -R npy ...)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# ccache hits across checkouts in other folders (CI clones afresh): paths relative to the tree.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake --preset default
cmake --build --preset default
log=build/default/ctest-last.log
set +e
ctest --test-dir build/default --output-on-failure -j2 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# ctest prints label times and skipped tests after its summary; repeat the summary last.
summary=$(grep -E '^[0-9]+% tests passed|No tests were found' "$log" | tail -n 1)
echo "${summary:-ctest: no summary (exit $rc)}"
exit "$rc"
