#!/usr/bin/env bash
# The main job, until the tuner exists: deploy a kernel to remote devices and measure it.
#
# Installs the dependencies, builds crosstune, starts two devices — a crosstune-server on this
# machine and an aarch64 crosstune-server under qemu-user (plus an armhf one when it was built) —
# builds the sample kernel (examples/kernels/sample.c) for each device with
# `crosstune build --target auto` (the device's own triple and cpu features), runs the package
# remotely with the `crosstune` CLI, checks the answers against numpy, times it with the device's
# time evaluator, and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${CROSSTUNE_BUILD_DIR:-$ROOT/build/default}

bash scripts/install-deps.sh
# ccache hits across checkouts in other folders (CI clones afresh): paths relative to the tree.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake --preset default -B "$BUILD" >/dev/null
targets=(crosstune crosstune-server)
# The whole list first: `ninja ... | grep -q` would fail under pipefail (grep stops reading at the
# first match and ninja dies of SIGPIPE once the list outgrows the pipe buffer).
all_targets=$(ninja -C "$BUILD" -t targets all 2>/dev/null) || all_targets=
for arch in aarch64 armhf; do
  if grep -q "^crosstune-server-$arch:" <<<"$all_targets"; then
    targets+=("crosstune-server-$arch")
  fi
done
echo "demo: building ${targets[*]}" >&2
cmake --build "$BUILD" --target "${targets[@]}"

CT="$BUILD/host_client/cli/crosstune"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crosstune-demo.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# start_server NAME CMD... : starts a server on 127.0.0.1, port 0 (the kernel picks a free
# one), and sets SERVER to the HOST:PORT it prints.
start_server() {
  local name=$1
  shift
  mkdir -p "$WORK/$name"
  # Created here, not by the background job's redirection, which may come after the first read
  # below (sed on a missing file fails, and set -e ends the demo).
  : >"$WORK/$name.out"
  "$@" --host 127.0.0.1 --port 0 --work-dir "$WORK/$name" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  PIDS+=($!)
  for _ in $(seq 300); do
    SERVER=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$WORK/$name.out")
    [ -n "$SERVER" ] && return 0
    sleep 0.1
  done
  echo "demo: $name server did not start; its log:" >&2
  cat "$WORK/$name.log" >&2
  exit 1
}

declare -A DEVICES
start_server local "$BUILD/rpc_server/crosstune-server"
DEVICES[local]=$SERVER
NAMES=(local)
if [ -x "$BUILD/cross/aarch64/rpc_server/crosstune-server" ]; then
  start_server qemu-aarch64 qemu-aarch64 -L /usr/aarch64-linux-gnu \
    "$BUILD/cross/aarch64/rpc_server/crosstune-server"
  DEVICES[qemu-aarch64]=$SERVER
  NAMES+=(qemu-aarch64)
else
  echo "demo: no aarch64 server was built (CROSSTUNE_CROSS_SERVERS=OFF?); local device only" >&2
fi
if [ -x "$BUILD/cross/armhf/rpc_server/crosstune-server" ]; then
  start_server qemu-armhf qemu-arm -L /usr/arm-linux-gnueabihf \
    "$BUILD/cross/armhf/rpc_server/crosstune-server"
  DEVICES[qemu-armhf]=$SERVER
  NAMES+=(qemu-armhf)
fi

# Inputs and their numpy reference answers.
N=1048576 M=192
"$PY" - "$WORK" "$N" "$M" <<'PYEOF'
import sys, numpy as np
work, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
for name, shape in [("x", (n,)), ("y", (n,)), ("a", (m, m)), ("b", (m, m))]:
    np.save(f"{work}/{name}.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PYEOF

check() {  # check KERNEL OUT.npy -> "ok" or "FAIL (max error E)"
  "$PY" - "$WORK" "$1" "$2" <<'PYEOF'
import sys, numpy as np
work, kernel, out = sys.argv[1:4]
L = lambda n: np.load(f"{work}/{n}.npy").astype(np.float64)
ref = L("x") + L("y") if kernel == "vadd" else L("a") @ L("b")
got = np.load(out)
err = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
print("ok" if err <= 1e-3 else f"FAIL (max error {err:.3g})")
PYEOF
}

ROWS=()
FAILED=0
for dev in "${NAMES[@]}"; do
  server=${DEVICES[$dev]}
  info=$("$CT" info --server "$server" --json)
  arch=$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["arch"])' <<<"$info")
  so="$WORK/sample-$dev.ctpkg"
  echo "demo: $dev ($arch at $server): building examples/kernels/sample.c for the device (--target auto)"
  # The builder compiles in-process with clang/LLVM and lld for whatever the device reports, and
  # packages the module with its manifest; the server verifies it before loading.
  "$CT" build examples/kernels/sample.c --target auto --server "$server" -o "$so" >/dev/null

  for kernel in vadd matmul; do
    if [ "$kernel" = vadd ]; then
      args=(--arg "$WORK/x.npy" --arg "$WORK/y.npy" --arg "${N}xf32:zeros")
      flops=$N
    else
      args=(--arg "$WORK/a.npy" --arg "$WORK/b.npy" --arg "${M}x${M}xf32:zeros")
      flops=$((2 * M * M * M))
    fi
    out="$WORK/$kernel-$dev.npy"
    "$CT" run --server "$server" "$so" --func "$kernel" "${args[@]}" --out "$out" >/dev/null
    ok=$(check "$kernel" "$out")
    [ "$ok" = ok ] || FAILED=1
    bench=$("$CT" bench --server "$server" "$so" --func "$kernel" "${args[@]}" \
      --number 3 --repeat 5 --min-repeat-ms 50 --flops "$flops" --json)
    ms=$("$PY" -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["median_s"] * 1e3))' <<<"$bench")
    gf=$("$PY" -c 'import json,sys; print("%.2f" % json.load(sys.stdin).get("gflops", 0))' <<<"$bench")
    ROWS+=("$dev|$arch|$kernel|$ms|$gf|$ok")
  done
done

echo
printf '%-14s %-8s %-8s %10s %10s  %s\n' device arch kernel ms GFLOP/s check
for row in "${ROWS[@]}"; do
  IFS='|' read -r dev arch kernel ms gf ok <<<"$row"
  printf '%-14s %-8s %-8s %10s %10s  %s\n' "$dev" "$arch" "$kernel" "$ms" "$gf" "$ok"
done
echo "(vadd: ${N} f32; matmul: ${M}x${M}x${M} f32; median of 5 rounds on the device; qemu devices are emulated, so their times are not a board's)"
exit $FAILED
