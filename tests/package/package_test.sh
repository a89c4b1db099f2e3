#!/usr/bin/env bash
# package_test.sh BUILD_DIR CONSUMER_SOURCE_DIR KERNEL.so CXX [KERNEL_SOURCE.c]
# Installs BUILD_DIR into a temporary prefix, builds the consumer there with CMake
# (find_package(crosstune CONFIG COMPONENTS client)) and with pkg-config (crosstune-client), checks
# that neither links a compiler library, and runs both against the installed crosstune-server.
# When the build has the tuner, tuner_consumer (beside CONSUMER_SOURCE_DIR) is built with
# find_package(crosstune CONFIG COMPONENTS tuner) and tunes on that server with XGBoost.
# With KERNEL_SOURCE, the installed `crosstune` finds its compiler module and builds it, with the
# build worker installed beside it.
set -euo pipefail
build=$1 consumer=$2 kernel=$3 cxx=$4 kernel_source=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/crosstune-package-test.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "package_test: FAIL: $*" >&2
  exit 1
}
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"
  fail "cmake --install"
}
for f in lib/cmake/crosstune/crosstuneConfig.cmake lib/cmake/crosstune/crosstuneConfigVersion.cmake \
         include/crosstune/version.h bin/crosstune-server; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
pc_dir=$(dirname "$(find "$prefix" -name crosstune-client.pc | head -n 1)")
[ -f "$pc_dir/crosstune-client.pc" ] || fail "crosstune-client.pc not installed"

# 1. CMake: find_package(crosstune CONFIG), nothing but the prefix to go on.
cmake -S "$consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  fail "the consumer does not configure against the installed package"
}
cmake --build "$work/cmake-build" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"
  fail "the consumer does not build against the installed package"
}

# 1b. crosstune::tuner, whose config must find XGBoost (and LLVM, clang) on its own.
tuner_consumer=$(dirname "$consumer")/tuner_consumer
with_tuner=0
if [ -e "$prefix/lib/cmake/crosstune/crosstuneTunerTargets.cmake" ]; then
  with_tuner=1
  cmake -S "$tuner_consumer" -B "$work/tuner-build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/tuner-configure.log" 2>&1 || {
    cat "$work/tuner-configure.log"
    fail "the tuner consumer does not configure against the installed package"
  }
  cmake --build "$work/tuner-build" >"$work/tuner-build.log" 2>&1 || {
    cat "$work/tuner-build.log"
    fail "the tuner consumer does not build against the installed package"
  }
  # Through a file: with pipefail, grep -q leaving early could fail the pipeline (SIGPIPE).
  ldd "$work/tuner-build/tuner_consumer" >"$work/tuner-ldd.txt"
  grep -q libxgboost "$work/tuner-ldd.txt" || fail "the tuner consumer does not link XGBoost"
fi

# 2. pkg-config, for projects without CMake.
PKG_CONFIG_PATH=$pc_dir pkg-config --exists crosstune-client || fail "pkg-config cannot find crosstune-client"
# shellcheck disable=SC2046  # pkg-config's flags are words
"$cxx" -O1 -o "$work/pc-consumer" "$consumer/consumer.cc" \
  $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs crosstune-client) 2>"$work/pc-build.log" || {
  cat "$work/pc-build.log"
  fail "the consumer does not build with pkg-config's flags"
}

# crosstune::client brings no compiler along.
for bin in "$work/cmake-build/consumer" "$work/pc-consumer"; do
  if ldd "$bin" | grep -Ei 'llvm|clang|lld|nvrtc'; then
    fail "$bin links compiler libraries"
  fi
done

# The installed command line: the binary needs no compiler; its compiler commands find the module
# in lib/crosstune.
if [ -n "$kernel_source" ] && [ -e "$prefix/bin/crosstune" ]; then
  if ldd "$prefix/bin/crosstune" | grep -Ei 'llvm|clang|lld|nvrtc|xgboost'; then
    fail "the installed crosstune links compiler libraries"
  fi
  "$prefix/bin/crosstune" tune --help >"$work/tune-help.log" 2>&1 || {
    cat "$work/tune-help.log"
    fail "the installed crosstune tune --help"
  }
  out=$("$prefix/bin/crosstune" build "$kernel_source" --target "llvm -mtriple=$(uname -m)-linux-gnu" \
          --no-cache -o "$work/installed.ctpkg" 2>&1) || fail "the installed crosstune build: $out"
  echo "$out"
  "$prefix/bin/crosstune" inspect "$work/installed.ctpkg" >/dev/null || fail "crosstune inspect"
  # Its builds run the worker installed beside it (libexec/crosstune), found from where it is
  # installed (this prefix is not the one the tree was configured with), and never the build
  # tree's, which exists. A wrapper in the installed worker's place records that it ran.
  worker=$(find "$prefix" -path '*/crosstune/crosstune-build-worker' -type f | head -n 1)
  [ -n "$worker" ] || fail "not installed: libexec/crosstune/crosstune-build-worker"
  mv "$worker" "$worker.real"
  printf '#!/bin/sh\n: >"%s"\nexec "%s" "$@"\n' "$work/installed-worker-ran" "$worker.real" >"$worker"
  chmod +x "$worker"
  out=$(env -u CROSSTUNE_BUILD_WORKER "$prefix/bin/crosstune" build "$kernel_source" \
          --target "llvm -mtriple=$(uname -m)-linux-gnu" --no-cache -o "$work/worker.ctpkg" 2>&1) ||
    fail "the installed crosstune build, through the installed worker: $out"
  [ -e "$work/installed-worker-ran" ] || fail "the installed crosstune did not run its installed build worker"
  mv "$worker.real" "$worker"
fi

# 3. Both talk to the installed server.
mkdir -p "$work/ws"
: >"$work/server.out"  # before the server's own redirection, so the first read finds it
"$prefix/bin/crosstune-server" --host 127.0.0.1 --port 0 --work-dir "$work/ws" \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
server=
for _ in $(seq 300); do
  server=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.out")
  [ -n "$server" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$server" ] || { cat "$work/server.log"; fail "the installed crosstune-server did not start"; }
for bin in "$work/cmake-build/consumer" "$work/pc-consumer"; do
  out=$("$bin" "$server" "$kernel") || fail "$bin: $out"
  echo "$out"
  [[ $out == "consumer: vadd ok on "* ]] || fail "$bin printed: $out"
done
if [ "$with_tuner" = 1 ]; then
  out=$("$work/tuner-build/tuner_consumer" "$server" "$work/tuner.jsonl" 2>&1) ||
    fail "tuner_consumer: $out"
  echo "$out" | tail -n 1
  [[ $(tail -n 1 <<<"$out") == "tuner_consumer: matmul tuned on "* ]] || fail "tuner_consumer printed: $out"
fi
echo "package_test: ok"
