#!/usr/bin/env bash
# The main job: tune a kernel on a farm of devices, deploy the best, check it.
#
# Installs the dependencies, builds crosstune, and starts a local farm: a crosstune-tracker, a
# crosstune-server on this machine, and the aarch64, armhf and riscv64 crosstune-servers under
# qemu-user, each registered with the tracker under its own key. On every device
# `crosstune tune matmul --target auto --tracker ... --key DEVICE` searches the matmul template's
# config space (XGBoost cost model; the template's default config is measured first, so untuned
# and tuned figures come from the same run), `crosstune export` builds the best config into a
# verified package, `crosstune run` deploys it through the tracker, and numpy checks the answer.
# Then the whole-model journey on every device: `crosstune compile` builds ResNet-50 (width 16,
# written by scripts/make-model.py) for the device's target with its tuning log, `crosstune
# run-model` runs it through the tracker, its logits are checked against onnxruntime's, and
# `crosstune bench-model` times it (on this machine; an emulated board's figure is run-model's one
# run). A second network, a BERT-style encoder (2 layers, hidden 128,
# 32 tokens; make-model.py bert), is compiled for the local device and the first board and run
# there the same way, its two outputs checked against onnxruntime's. Prints a table with one row
# per device and the time each step took. Exits non-zero if a device is missing or a check fails.
#
# The first result comes early: only the host tools are built before the local device tunes; the
# board servers build in the background meanwhile (on the CPUs the local server does not use, so
# no build shares a core with a timed kernel), and each board tunes as soon as its server is up.
# The riscv64 server's OpenSSL is built from source the first time that board is built, and kept.
#
# CROSSTUNE_BUILD_DIR picks another build directory; CROSSTUNE_DEMO_TRIALS the trials per device
# (default 48 on this machine, 16 under qemu, 48 there too with CROSSTUNE_DEMO_SCREENSHOT=FILE, which
# saves a picture of the tracker's status page taken while three runs are tuning).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${CROSSTUNE_BUILD_DIR:-$ROOT/build/default}

# A line when a step starts and one with its time when it ends; the times again at the end.
STEPS=()
step_begin() {
  STEP=$1
  STEP_T0=$SECONDS
  echo "demo: [$(date +%T)] $STEP ..."
}
step_end() {
  local took=$((SECONDS - STEP_T0))
  STEPS+=("$STEP: $took s")
  echo "demo: [$(date +%T)] $STEP: done in $took s (${SECONDS} s since the start)"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crosstune-demo.XXXXXX")
PIDS=()
BG_PIDS=()
kill_tree() {  # kill_tree PID: the process and everything it started (a background build's ninja)
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
cleanup() {
  for pid in "${BG_PIDS[@]}"; do kill_tree "$pid"; done
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BG_PIDS[@]}" "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
# A signal ends the script (its EXIT trap then cleans up); a trap alone would carry on after it.
trap cleanup EXIT
trap "exit 130" INT
trap "exit 143" TERM

step_begin "dependencies (Debian packages)"
bash scripts/install-deps.sh apt
step_end
# The model step's venv (onnx, onnxruntime) installs while the tools build; it is needed last.
bash scripts/install-deps.sh model >"$WORK/deps-model.log" 2>&1 &
DEPS_MODEL_PID=$!
BG_PIDS+=("$DEPS_MODEL_PID")

# ccache hits across checkouts in other folders (CI clones afresh): paths relative to the tree.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Five build trees (main, fuzz, asan, tsan, the ARM servers) outgrow ccache's default 5 GB.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
step_begin "building the host tools (crosstune, crosstune-server, crosstune-tracker)"
cmake --preset default -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target crosstune crosstune-server crosstune-tracker
step_end
# The board servers are built whenever their cross compilers and qemu are present (install-deps.sh
# installs them). The target list is read into a variable first: grep -q on a pipe would close it
# early and fail the pipeline with SIGPIPE under pipefail.
BOARDS=()
all_targets=$(ninja -C "$BUILD" -t targets all 2>/dev/null || true)
for arch in aarch64 armhf riscv64; do
  if grep -q "^crosstune-server-$arch:" <<<"$all_targets"; then
    BOARDS+=("$arch")
  fi
done

CT="$BUILD/cli/crosstune"
# This tree's crosstune runs this tree's build worker (built with it), named explicitly: the
# builder itself finds only an installed one.
export CROSSTUNE_BUILD_WORKER="${CROSSTUNE_BUILD_WORKER:-$BUILD/build_worker/crosstune-build-worker}"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
# onnx, onnxruntime and numpy for the model (install-deps.sh creates this venv).
MODEL_PY=${CROSSTUNE_MODEL_VENV:-/opt/crosstune/model-venv}/bin/python

# The CPUs: the local server times its kernels on the first one; builds, the tuners' compiles and
# the emulated boards run on the others. (One CPU: everything shares it, and the board servers
# are built after the local device has tuned.)
NCPU=$(nproc)
LOCAL_CPUS=0
OTHER_CPUS=1-$((NCPU - 1))
ON_OTHERS=(taskset -c "$OTHER_CPUS")
if [ "$NCPU" -lt 2 ]; then
  LOCAL_CPUS=0
  ON_OTHERS=()
fi

# wait_line FILE REGEX: waits (up to 60 s) for a line of FILE matching REGEX and prints its first
# capture group.
wait_line() {
  local file=$1 re=$2 v
  for _ in $(seq 600); do
    v=$(sed -n "s/$re/\\1/p" "$file" 2>/dev/null | head -n 1)
    if [ -n "$v" ]; then
      echo "$v"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

step_begin "starting the farm (tracker and local server)"
: >"$WORK/tracker.out"
"${ON_OTHERS[@]}" "$BUILD/tracker/crosstune-tracker" --host 127.0.0.1 --port 0 --http-port 0 \
  --startup-grace-s 0 --db "$WORK/tracker.db" >"$WORK/tracker.out" 2>"$WORK/tracker.log" &
PIDS+=($!)
TRACKER=$(wait_line "$WORK/tracker.out" '.*listening on \([^ ]*\) http.*') || {
  echo "demo: the tracker did not start; its log:" >&2
  cat "$WORK/tracker.log" >&2
  exit 1
}

start_server() {  # start_server NAME CMD...
  local name=$1
  shift
  mkdir -p "$WORK/$name"
  : >"$WORK/$name.out"  # before the job starts, so the first read never finds it missing
  "$@" --host 127.0.0.1 --port 0 --work-dir "$WORK/$name" --tracker "$TRACKER" --key "$name" \
    >"$WORK/$name.out" 2>"$WORK/$name.log" &
  PIDS+=($!)
  if ! wait_line "$WORK/$name.out" '.*listening on \([^ ]*\).*' >/dev/null; then
    echo "demo: the $name server did not start; its log:" >&2
    cat "$WORK/$name.log" >&2
    exit 1
  fi
  # Registered before anyone asks the tracker for it.
  local n
  for _ in $(seq 300); do
    n=$("$CT" query --tracker "$TRACKER" --json 2>/dev/null | "$PY" -c '
import json, sys
print(sum(1 for d in json.load(sys.stdin)["devices"] if d.get("key") == sys.argv[1]))' "$name" \
      2>/dev/null || echo 0)
    [ "$n" -ge 1 ] && return 0
    sleep 0.1
  done
  echo "demo: the $name server did not register with the tracker; its log:" >&2
  cat "$WORK/$name.log" >&2
  exit 1
}

NAMES=(local)
local_server=("$BUILD/rpc_server/crosstune-server")
[ "$NCPU" -ge 2 ] && local_server+=(--cpus "$LOCAL_CPUS")
start_server local "${local_server[@]}"
HTTP=$(sed -n 's/.* http \([^ ]*\).*/\1/p' "$WORK/tracker.out" | head -n 1)
echo "demo: the tracker is at $TRACKER; watch the tuning on its status page: http://$HTTP/"
step_end

# Under qemu the boards are emulated (slow), so they get a smaller matmul and fewer trials; their
# figures are emulation speed, not a board's.
declare -A SHAPE=() TRIALS=()
shape_and_trials() {  # shape_and_trials DEVICE
  local dev=$1 board_trials=16
  if [ "$dev" = local ]; then
    SHAPE[$dev]=256,256,256
    TRIALS[$dev]=${CROSSTUNE_DEMO_TRIALS:-48}
  else
    SHAPE[$dev]=48,48,48
    # A screenshot of the page is taken once three runs have a curve: the boards then tune long
    # enough to be still tuning when Chromium draws it (16 trials end within seconds of that).
    [ -n "${CROSSTUNE_DEMO_SCREENSHOT:-}" ] && board_trials=48
    TRIALS[$dev]=${CROSSTUNE_DEMO_TRIALS:-$board_trials}
  fi
}
declare -A TUNE_PID=()
start_tune() {  # start_tune DEVICE: tunes in the background (its compiles off the local CPU)
  local dev=$1
  shape_and_trials "$dev"
  "${ON_OTHERS[@]}" "$CT" tune matmul --shape "${SHAPE[$dev]}" --target auto --tracker "$TRACKER" \
    --key "$dev" --trials "${TRIALS[$dev]}" --batch 8 --workers 1 --repeat 3 --min-repeat-ms 20 \
    --log "$WORK/$dev.jsonl" --json >"$WORK/$dev.tune.json" 2>"$WORK/$dev.tune.log" &
  TUNE_PID[$dev]=$!
}
# gflops FILE: "untuned tuned trials" from a tune's --json output.
tune_figures() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("%.2f" % j.get("default", {}).get("gflops", 0), "%.2f" % j.get("best", {}).get("gflops", 0),
      j["trials_in_log"])
PYEOF
}

# The boards' servers, one after the other, in the background on the other CPUs; each writes
# $WORK/built-ARCH ("EXIT-STATUS SECONDS") when done. The local device tunes meanwhile (with one
# CPU, after it).
build_boards() {
  [ ${#BOARDS[@]} -gt 0 ] || return 0
  local targets=("${BOARDS[@]/#/crosstune-server-}")
  BOARDS_T0=$SECONDS
  echo "demo: building ${targets[*]} in the background${ON_OTHERS:+ (CPUs $OTHER_CPUS)}"
  (
    for arch in "${BOARDS[@]}"; do
      t0=$SECONDS
      rc=0
      nice -n 10 "${ON_OTHERS[@]}" cmake --build "$BUILD" --target "crosstune-server-$arch" \
        >"$WORK/build-$arch.log" 2>&1 || rc=$?
      echo "$rc $((SECONDS - t0))" >"$WORK/built-$arch.tmp"
      mv "$WORK/built-$arch.tmp" "$WORK/built-$arch"
    done
  ) &
  BG_PIDS+=($!)
}
[ "$NCPU" -ge 2 ] && build_boards

step_begin "tuning matmul on the local device (first result)"
start_tune local
declare -A QEMU=([aarch64]=qemu-aarch64 [armhf]=qemu-arm [riscv64]=qemu-riscv64)
declare -A SYSROOT=([aarch64]=/usr/aarch64-linux-gnu [armhf]=/usr/arm-linux-gnueabihf
  [riscv64]=/usr/riscv64-linux-gnu)
declare -A BOARD_DONE=()
FAILED=0
local_reported=0
# Until the local device has tuned and every board has been built (and, when it built, started).
while :; do
  if [ "$local_reported" = 0 ] && ! kill -0 "${TUNE_PID[local]}" 2>/dev/null; then
    if wait "${TUNE_PID[local]}"; then
      read -r untuned tuned trials < <(tune_figures "$WORK/local.tune.json") || true
      step_end
      echo "demo: first result: local matmul ${SHAPE[local]}: $untuned GFLOP/s untuned," \
        "$tuned GFLOP/s tuned ($trials trials, CPU $LOCAL_CPUS of $NCPU), after ${SECONDS} s"
    else
      step_end
      echo "demo: tuning on local failed:" >&2
      tail -n 5 "$WORK/local.tune.log" >&2
      FAILED=1
    fi
    local_reported=1
    [ "$NCPU" -lt 2 ] && build_boards
  fi
  for arch in "${BOARDS[@]}"; do
    [ -n "${BOARD_DONE[$arch]:-}" ] && continue
    [ -f "$WORK/built-$arch" ] || continue
    BOARD_DONE[$arch]=1
    read -r rc took <"$WORK/built-$arch"
    server="$BUILD/cross/$arch/rpc_server/crosstune-server"
    if [ "$rc" != 0 ] || [ ! -x "$server" ]; then
      echo "demo: building crosstune-server-$arch failed (exit $rc); its log's tail:" >&2
      tail -n 20 "$WORK/build-$arch.log" >&2
      FAILED=1
      continue
    fi
    echo "demo: [$(date +%T)] crosstune-server-$arch built in $took s; tuning qemu-$arch"
    # The board's libraries from the cross sysroot only (a multiarch libc6:arm64 on this host
    # would otherwise be found through its ld.so.cache, another build than the sysroot's loader).
    start_server "qemu-$arch" "${ON_OTHERS[@]}" "${QEMU[$arch]}" -L "${SYSROOT[$arch]}" \
      -E "LD_LIBRARY_PATH=${SYSROOT[$arch]}/lib" "$server"
    NAMES+=("qemu-$arch")
    start_tune "qemu-$arch"
  done
  [ "$local_reported" = 1 ] && [ ${#BOARD_DONE[@]} = ${#BOARDS[@]} ] && break
  sleep 0.5
done

if [ -n "${CROSSTUNE_DEMO_SCREENSHOT:-}" ]; then
  # Once enough runs report with a curve of two points or more (or every tune has ended).
  want=$((${#NAMES[@]} < 3 ? ${#NAMES[@]} : 3))
  while :; do
    n=$("$CT" query --tracker "$TRACKER" --json 2>/dev/null | "$PY" -c '
import json, sys
runs = json.load(sys.stdin).get("tune_runs", [])
print(sum(1 for r in runs if not r["finished"] and len(r["curve"]) >= 2))' 2>/dev/null || echo 0)
    [ "$n" -ge "$want" ] && break
    running=0
    for dev in "${NAMES[@]}"; do kill -0 "${TUNE_PID[$dev]}" 2>/dev/null && running=1; done
    [ "$running" = 1 ] || break
    sleep 0.5
  done
  if chromium --headless --disable-gpu --no-sandbox --no-first-run --user-data-dir="$WORK/chromium" \
    --virtual-time-budget=3000 --window-size=1280,1400 --screenshot="$CROSSTUNE_DEMO_SCREENSHOT" \
    "http://$HTTP/" >"$WORK/chromium.log" 2>&1; then
    echo "demo: status page with $n runs tuning saved as $CROSSTUNE_DEMO_SCREENSHOT"
  else
    echo "demo: no screenshot (chromium failed: $(tail -n 1 "$WORK/chromium.log"))" >&2
  fi
fi
for dev in "${NAMES[@]}"; do
  [ "$dev" = local ] && continue
  if ! wait "${TUNE_PID[$dev]}"; then
    echo "demo: tuning on $dev failed:" >&2
    tail -n 5 "$WORK/$dev.tune.log" >&2
    FAILED=1
  fi
done
if [ ${#BOARDS[@]} -gt 0 ]; then
  took=$((SECONDS - BOARDS_T0))
  STEPS+=("the boards, built and tuned beside the local device: $took s")
  echo "demo: [$(date +%T)] the boards (${BOARDS[*]}) built and tuned, $took s after their" \
    "first build began (${SECONDS} s since the start)"
fi

step_begin "the model on every device (${NAMES[*]})"
if ! wait "$DEPS_MODEL_PID"; then
  cat "$WORK/deps-model.log" >&2
  echo "demo: installing the model venv failed (above)" >&2
  exit 1
fi

# The whole model on every device at once: ResNet-50 width 16 and onnxruntime's logits for a
# seeded input, then on each device compile (its log's records where they fit; the matmul log has
# none for the convs, so their default configs), run-model through the tracker, bench-model.
echo "demo: compiling ResNet-50 (width 16) for ${NAMES[*]} and running it through the tracker"
"$MODEL_PY" scripts/make-model.py resnet50 --width 16 -o "$WORK/r50w16.onnx"
"$MODEL_PY" scripts/onnx-reference.py "$WORK/r50w16.onnx" --seed 1 --write-inputs "$WORK/model-in" \
  --out-dir "$WORK/model-ref"
# The BERT-style encoder: token ids below its vocabulary of 1000, a 0/1 mask and token types.
"$MODEL_PY" scripts/make-model.py bert -o "$WORK/bert.onnx"
"$MODEL_PY" scripts/onnx-reference.py "$WORK/bert.onnx" --seed 1 --int-high input_ids=1000 \
  --write-inputs "$WORK/bert-in" --out-dir "$WORK/bert-ref"
BERT_ON=(local)
for dev in "${NAMES[@]}"; do
  [ "$dev" != local ] && BERT_ON+=("$dev") && break
done
# Emulated boards run a whole network in seconds to tens of seconds, all of them on one CPU: their
# figure is run-model's own time of its one run (bench-model's warm-up and timed runs would take
# two runs more, 60-90 s of that CPU for the three boards; emulated speed is not a board's anyway).
MODEL_PIDS=()
for dev in "${NAMES[@]}"; do
  (
    "${ON_OTHERS[@]}" "$CT" compile "$WORK/r50w16.onnx" --log "$WORK/$dev.jsonl" --target auto --tracker "$TRACKER" \
      --key "$dev" --workers 1 -o "$WORK/$dev-model.ctpkg" &&
      "${ON_OTHERS[@]}" "$CT" run-model "$WORK/$dev-model.ctpkg" --tracker "$TRACKER" --key "$dev" \
        --input "input=$WORK/model-in/input.npy" --out "$WORK/$dev-logits.npy" --json >"$WORK/$dev-run.json" &&
      if [ "$dev" = local ]; then
        "${ON_OTHERS[@]}" "$CT" bench-model "$WORK/$dev-model.ctpkg" --tracker "$TRACKER" --key "$dev" --number 1 \
          --repeat 3 --min-repeat-ms 0 --json >"$WORK/$dev-model.json"
      else
        cp "$WORK/$dev-run.json" "$WORK/$dev-model.json"
      fi &&
      if [[ " ${BERT_ON[*]} " == *" $dev "* ]]; then
        "${ON_OTHERS[@]}" "$CT" compile "$WORK/bert.onnx" --target auto --tracker "$TRACKER" --key "$dev" \
          --workers 1 -o "$WORK/$dev-bert.ctpkg" &&
          "${ON_OTHERS[@]}" "$CT" run-model "$WORK/$dev-bert.ctpkg" --tracker "$TRACKER" --key "$dev" \
            --input "input_ids=$WORK/bert-in/input_ids.npy" \
            --input "attention_mask=$WORK/bert-in/attention_mask.npy" \
            --input "token_type_ids=$WORK/bert-in/token_type_ids.npy" \
            --out "last_hidden_state=$WORK/$dev-bert-hidden.npy" \
            --out "pooler_output=$WORK/$dev-bert-pooled.npy"
      fi
  ) >"$WORK/$dev.model.log" 2>&1 &
  MODEL_PIDS+=($!)
done
for i in "${!NAMES[@]}"; do
  if ! wait "${MODEL_PIDS[$i]}"; then
    echo "demo: the model on ${NAMES[$i]} failed:" >&2
    tail -n 5 "$WORK/${NAMES[$i]}.model.log" >&2
  fi
done
step_end

# Deploy each device's best config and check it against numpy.
step_begin "deploying each device's best config and checking it"
ROWS=()
for dev in "${NAMES[@]}"; do
  IFS=, read -r m n k <<<"${SHAPE[$dev]}"
  "$PY" - "$WORK" "$dev" "$m" "$n" "$k" <<'PYEOF'
import sys, numpy as np
work, dev, m, n, k = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
rng = np.random.default_rng(7)
np.save(f"{work}/{dev}-a.npy", rng.uniform(-1, 1, (m, k)).astype(np.float32))
np.save(f"{work}/{dev}-b.npy", rng.uniform(-1, 1, (k, n)).astype(np.float32))
PYEOF
  arch=? untuned=- tuned=- trials=- ok=FAIL
  if [ -s "$WORK/$dev.tune.json" ]; then
    read -r arch untuned tuned trials < <("$PY" - "$WORK/$dev.tune.json" "$WORK/$dev.jsonl" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
arch = "?"
for line in open(sys.argv[2]):
    try:
        arch = json.loads(line)["device"]["arch"] or arch
        break
    except Exception:
        pass
print(arch, "%.2f" % j.get("default", {}).get("gflops", 0), "%.2f" % j.get("best", {}).get("gflops", 0),
      j["trials_in_log"])
PYEOF
)
    pkg="$WORK/$dev.ctpkg"
    out="$WORK/$dev-c.npy"
    if "$CT" export "$WORK/$dev.jsonl" -o "$pkg" >/dev/null &&
      "$CT" run --tracker "$TRACKER" --key "$dev" "$pkg" --func matmul --arg "$WORK/$dev-a.npy" \
        --arg "$WORK/$dev-b.npy" --arg "${m}x${n}xf32:zeros" --out "$out" >/dev/null; then
      ok=$("$PY" - "$WORK" "$dev" "$out" "$k" <<'PYEOF'
import sys, numpy as np
work, dev, out, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
a = np.load(f"{work}/{dev}-a.npy").astype(np.float64)
b = np.load(f"{work}/{dev}-b.npy").astype(np.float64)
got = np.load(out)
err = float(np.max(np.abs(got - a @ b))) if got.shape == (a.shape[0], b.shape[1]) else float("inf")
print("ok" if err <= 2e-6 * k + 1e-4 else f"FAIL (max error {err:.3g})")
PYEOF
)
    fi
  fi
  [ "$ok" = ok ] || FAILED=1
  # The model: its end-to-end time and its logits against onnxruntime's.
  model_ms=- model_ok=FAIL
  if [ -s "$WORK/$dev-model.json" ] && [ -s "$WORK/$dev-logits.npy" ]; then
    read -r model_ms model_ok < <("$MODEL_PY" - "$WORK/$dev-model.json" "$WORK/$dev-logits.npy" \
      "$WORK/model-ref/logits.npy" <<'PYEOF'
import json, sys, numpy as np
bench, got, want = json.load(open(sys.argv[1])), np.load(sys.argv[2]), np.load(sys.argv[3])
ok = got.shape == want.shape and bool(np.all(np.abs(got - want) <= 1e-4 + 1e-3 * np.abs(want)))
err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
# bench-model's median where it timed the model, else run-model's time of its one run.
ms = (bench["median_s"] if "median_s" in bench else bench["seconds"]) * 1e3
print("%.2f" % ms, "ok" if ok else "FAIL(%.3g)" % err)
PYEOF
)
  fi
  [ "$model_ok" = ok ] || FAILED=1
  # The BERT-style encoder where it ran: both outputs against onnxruntime's.
  bert_ok=-
  if [[ " ${BERT_ON[*]} " == *" $dev "* ]]; then
    bert_ok=$("$MODEL_PY" - "$WORK/$dev-bert-hidden.npy" "$WORK/bert-ref/last_hidden_state.npy" \
      "$WORK/$dev-bert-pooled.npy" "$WORK/bert-ref/pooler_output.npy" <<'PYEOF'
import os, sys, numpy as np
worst, ok = 0.0, True
for got, want in zip(sys.argv[1::2], sys.argv[2::2]):
    if not os.path.exists(got):
        print("FAIL(no output)")
        sys.exit()
    g, w = np.load(got), np.load(want)
    ok = ok and g.shape == w.shape and bool(np.all(np.abs(g - w) <= 1e-4 + 1e-3 * np.abs(w)))
    worst = max(worst, float(np.max(np.abs(g - w))) if g.shape == w.shape else float("inf"))
print("ok" if ok else "FAIL(%.3g)" % worst)
PYEOF
)
    [ "$bert_ok" = ok ] || FAILED=1
  fi
  ROWS+=("$dev|$arch|${SHAPE[$dev]}|$untuned|$tuned|$trials|$ok|$model_ms|$model_ok|$bert_ok")
done
step_end

echo
printf '%-14s %-8s %-12s %10s %10s %7s  %-6s %9s  %-11s %s\n' device arch matmul untuned tuned \
  trials check "model ms" "model check" "bert check"
for row in "${ROWS[@]}"; do
  IFS='|' read -r dev arch shape untuned tuned trials ok model_ms model_ok bert_ok <<<"$row"
  printf '%-14s %-8s %-12s %10s %10s %7s  %-6s %9s  %-11s %s\n' "$dev" "$arch" "$shape" \
    "$untuned" "$tuned" "$trials" "$ok" "$model_ms" "$model_ok" "$bert_ok"
done
echo "(GFLOP/s of the template's default config and of the best one found; fp32 matmul M,N,K;"
echo " the best config exported to a .ctpkg, deployed through the tracker and checked against numpy;"
echo " model: ResNet-50 v1.5 at width 16, compiled for the device into one package, run through the"
echo " tracker: median ms of a whole run (on a qemu device: its one run), logits checked against"
echo " onnxruntime's (|d| <= 1e-4 + 1e-3 |ref|); bert: a 2-layer BERT-style encoder compiled and run the"
echo " same way, both outputs checked so; qemu devices are emulated, so their speeds are not a board's)"
printf -v times '%s; ' "${STEPS[@]}"
echo "demo: time by step: ${times%; }; total $SECONDS s"
exit $FAILED
