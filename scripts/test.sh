#!/usr/bin/env bash
# Installs the dependencies, builds everything with the default preset (Ninja, ccache) — the host
# tools, the aarch64/armhf servers for the qemu tests, the tests and benchmarks — and runs ctest.
# ctest's own summary is the last thing printed.
#   scripts/test.sh                 every test
#   scripts/test.sh -L unit         extra arguments go to ctest (-L qemu, -LE slow, -R npy ...)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default
exec ctest --test-dir build/default --output-on-failure -j2 "$@"
