#!/usr/bin/env bash
# The Debian packages as a user meets them:
#  1. builds the .debs (the `debs` target: amd64 crosstune-server, crosstune-tracker, crosstune;
#     arm64 and armhf crosstune-server) and runs lintian on every one (clean but for the overrides
#     the packages ship, packaging/*.lintian-overrides);
#  2. installs the amd64 ones with apt into a throwaway Debian root made by mmdebstrap (cached:
#     only the packages' dependencies are in the cached image), checks the units with
#     systemd-analyze verify there, edits the conffiles as a user would (the tracker's address,
#     ports from the kernel), and starts the tracker and the server as their units say: the
#     ExecStart line, as the unit's user, in the state directory systemd would make;
#  3. runs a lease and a session through them with the installed `crosstune`;
#  4. unpacks the arm64 and armhf .debs and runs their servers under qemu-user, with their own
#     conffile, against the same tracker, and runs a leased session on each.
# Usage: deb_test.sh BUILD_DIR
# CROSSTUNE_DEB_ROOT_CACHE moves the cached root images (default ~/.cache/crosstune/deb-root);
# CROSSTUNE_KEEP_DEB_ROOT=1 keeps the throwaway root for a look.
set -euo pipefail
build=$(cd "$1" && pwd)
fail() {
  echo "deb_test: FAIL: $*" >&2
  exit 1
}
step() { echo "deb_test: $* ($(date +%T))"; }
# What the machine cannot do is a skip (exit 77, ctest's SKIP_RETURN_CODE), said on the last line:
# not root, a root that may not mount (a container without CAP_SYS_ADMIN), no Debian mirror.
skip() {
  echo "deb_test: SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (chroot, mount, and the packages' system users); ran as uid $(id -u)"
for tool in lintian mmdebstrap systemd-analyze dpkg-deb; do
  command -v "$tool" >/dev/null || fail "$tool is missing; run scripts/install-deps.sh"
done
probe=$(mktemp -d "$build/deb-mount-probe.XXXXXX")
if ! mount -t tmpfs probe "$probe" 2>"$probe.err"; then
  why=$(tr -s "\n\t" "  " <"$probe.err" | head -c 200)
  rm -rf "$probe" "$probe.err"
  skip "root may not mount here (the throwaway root needs /proc): $why"
fi
umount "$probe"
if ! chroot --userspec=65534:65534 / true 2>"$probe.err"; then
  why=$(tr -s "\n\t" "  " <"$probe.err" | head -c 200)
  rm -rf "$probe" "$probe.err"
  skip "root may not chroot to another user here (the units' users): $why"
fi
rm -rf "$probe" "$probe.err"

step "building the .debs"
cmake --build "$build" --target debs >"$build/debs-build.log" 2>&1 ||
  { tail -n 40 "$build/debs-build.log"; fail "cmake --build --target debs failed"; }
shopt -s nullglob
host_debs=("$build"/debs/*.deb)
arm64_deb=("$build"/cross/aarch64/debs/crosstune-server_*_arm64.deb)
armhf_deb=("$build"/cross/armhf/debs/crosstune-server_*_armhf.deb)
shopt -u nullglob
[ ${#host_debs[@]} = 3 ] || fail "expected 3 amd64 .debs in $build/debs, found ${host_debs[*]:-none}"
[ ${#arm64_deb[@]} = 1 ] || fail "no arm64 crosstune-server .deb in $build/cross/aarch64/debs"
[ ${#armhf_deb[@]} = 1 ] || fail "no armhf crosstune-server .deb in $build/cross/armhf/debs"

# 1. lintian, remembered per .deb content: a rebuilt but identical package is not checked again.
lint_cache="$build/debs-lintian"
mkdir -p "$lint_cache"
for deb in "${host_debs[@]}" "${arm64_deb[0]}" "${armhf_deb[0]}"; do
  stamp="$lint_cache/$(sha256sum "$deb" | cut -c1-32).ok"
  [ -f "$stamp" ] && continue
  step "lintian $(basename "$deb")"
  if ! lintian --fail-on error,warning --display-info "$deb" >"$lint_cache/last.log" 2>&1; then
    cat "$lint_cache/last.log"
    # The errors and warnings again, last, where a short tail of the output still shows them.
    grep -E '^(E|W): ' "$lint_cache/last.log" | tail -n 3 >&2 || true
    fail "lintian: $(basename "$deb")"
  fi
  cat "$lint_cache/last.log"
  touch "$stamp"
done

# 2. A throwaway root with the packages' dependencies (the image is cached by the sorted list).
deps=$(for deb in "${host_debs[@]}"; do dpkg-deb -f "$deb" Depends; echo ,; done |
  tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' |
  grep -v -e '^$' -e '^crosstune' | sort -u | paste -sd, -)
cache=${CROSSTUNE_DEB_ROOT_CACHE:-${HOME:-$build}/.cache/crosstune/deb-root}
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
image="$cache/$suite-$(echo "$deps" | sha256sum | cut -c1-16).tar"
if [ ! -f "$image" ]; then
  step "mmdebstrap $suite with $deps (once; cached as $image)"
  mkdir -p "$cache"
  # The mirrors and apt settings this machine's own apt uses (install-deps.sh installed through
  # them), not mmdebstrap's defaults: a machine may reach Debian only through its configured ones.
  mapfile -t mirrors < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
    'Created-By: Packages' 2>/dev/null | sort -u | sed 's/^/deb /')
  aptopts=()
  for f in /etc/apt/apt.conf.d/*; do [ -f "$f" ] && aptopts+=("--aptopt=$f"); done
  if ! mmdebstrap --variant=apt --format=tar --include="$deps" "${aptopts[@]}" "$suite" \
    "$image.part" "${mirrors[@]}" >"$cache/mmdebstrap.log" 2>&1; then
    cat "$cache/mmdebstrap.log"
    rm -f "$image.part"
    # No way to the mirror is the machine's; anything else (a Depends naming no package) is ours.
    if grep -qE 'Failed to fetch|Could not resolve|Temporary failure resolving|Could not connect|Network is unreachable' \
      "$cache/mmdebstrap.log"; then
      skip "mmdebstrap could not reach the Debian mirror for the throwaway root: $(grep -m1 -E 'Failed to fetch|Could not' "$cache/mmdebstrap.log" | head -c 200)"
    fi
    fail "mmdebstrap could not make a $suite root (above)"
  fi
  mv "$image.part" "$image"
fi
# The throwaway root lives in the build folder (nothing is left in /tmp); a run killed halfway
# leaves it there, and the next run removes it first.
work="$build/deb-test"
umount "$work/root/proc" 2>/dev/null || true
rm -rf "$work"
mkdir -p "$work"
root="$work/root"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  umount "$root/proc" 2>/dev/null || true
  if [ -z "${CROSSTUNE_KEEP_DEB_ROOT:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
mkdir -p "$root"
tar -C "$root" -xf "$image"
mount -t proc proc "$root/proc"
mkdir -p "$root/tmp/debs"
cp "${host_debs[@]}" "$root/tmp/debs/"
step "apt install ./crosstune*.deb in the throwaway root"
chroot "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  /tmp/debs/*.deb' >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt install"; }
for f in /usr/bin/crosstune-server /usr/bin/crosstune-tracker /usr/bin/crosstune \
  /etc/crosstune/server.conf /etc/crosstune/tracker.conf \
  /lib/systemd/system/crosstune-server.service /lib/systemd/system/crosstune-tracker.service \
  /lib/systemd/system/crosstune-build-worker.service /etc/crosstune/build-worker.conf \
  /usr/libexec/crosstune/crosstune-build-worker /usr/lib/cmake/crosstune/crosstuneConfig.cmake; do
  [ -e "$root$f" ] || fail "$f is not installed"
done
grep -q '^crosstune:' "$root/etc/passwd" || fail "the postinst made no crosstune user"
grep -q '^crosstune-tracker:' "$root/etc/passwd" || fail "the postinst made no crosstune-tracker user"
grep -q '^crosstune-build-worker:' "$root/etc/passwd" ||
  fail "the postinst made no crosstune-build-worker user"
chroot "$root" dpkg-query -W -f='${Conffiles}\n' crosstune | grep -q /etc/crosstune/build-worker.conf ||
  fail "/etc/crosstune/build-worker.conf is not a conffile"
# Off until the admin enables it: installing the CLI starts no network service.
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/crosstune-build-worker.service" ] ||
  fail "crosstune-build-worker.service is enabled on install"
chroot "$root" dpkg-query -W -f='${Conffiles}\n' crosstune-server | grep -q /etc/crosstune/server.conf ||
  fail "/etc/crosstune/server.conf is not a conffile"
[ -L "$root/etc/systemd/system/multi-user.target.wants/crosstune-server.service" ] ||
  fail "crosstune-server.service is not enabled"

step "systemd-analyze verify (the units as installed)"
for unit in crosstune-server.service crosstune-tracker.service crosstune-server-config.path \
  crosstune-server-config.service crosstune-build-worker.service; do
  systemd-analyze verify --man=no --root="$root" "$root/lib/systemd/system/$unit" \
    >"$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "systemd-analyze verify $unit"; }
  if [ -s "$work/verify.log" ]; then cat "$work/verify.log"; fail "systemd-analyze verify $unit warns"; fi
done

# The ExecStart= of an installed unit, as words.
exec_start() { sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/$1" | head -n 1; }
# What systemd does before ExecStart: the state directory, owned by the unit's user.
state_dir() {
  local unit=$1 user=$2 dir
  dir=$(sed -n 's/^StateDirectory=//p' "$root/lib/systemd/system/$unit")
  mkdir -p "$root/var/lib/$dir"
  chroot "$root" chown "$user:$user" "/var/lib/$dir"
  chmod 0750 "$root/var/lib/$dir"
}
# Starts "$@" in the background with stdout to $log; waits for its "listening on" line.
start_and_wait() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  pids+=($!)
  local pid=$!
  for _ in $(seq 1 600); do
    grep -q 'listening on' "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "$* exited before listening"; }
    sleep 0.1
  done
  cat "$log"
  fail "$* did not listen"
}
set_conf() {  # set_conf FILE KEY VALUE: what a user does in an editor
  local file=$1 key=$2 value=$3
  if grep -qE "^#? ?$key = " "$file"; then
    sed -i -E "s|^#? ?$key = .*|$key = $value|" "$file"
  else
    echo "$key = $value" >>"$file"
  fi
}

step "starting crosstune-tracker as its unit does"
set_conf "$root/etc/crosstune/tracker.conf" port 0
set_conf "$root/etc/crosstune/tracker.conf" http-port 0
state_dir crosstune-tracker.service crosstune-tracker
read -r -a tracker_cmd <<<"$(exec_start crosstune-tracker.service)"
start_and_wait "$work/tracker.log" chroot --userspec=crosstune-tracker:crosstune-tracker "$root" \
  "${tracker_cmd[@]}"
tracker_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) http.*/\1/p' "$work/tracker.log")
[ -n "$tracker_port" ] || fail "no tracker port in: $(cat "$work/tracker.log")"
tracker="127.0.0.1:$tracker_port"
[ -f "$root/var/lib/crosstune-tracker/tracker.sqlite" ] || fail "the tracker's DB is not in its state directory"

step "starting crosstune-server as its unit does (tracker $tracker)"
set_conf "$root/etc/crosstune/server.conf" tracker "\"$tracker\""
set_conf "$root/etc/crosstune/server.conf" key '"deb-amd64"'
set_conf "$root/etc/crosstune/server.conf" port 0
state_dir crosstune-server.service crosstune
read -r -a server_cmd <<<"$(exec_start crosstune-server.service)"
start_and_wait "$work/server.log" chroot --userspec=crosstune:crosstune "$root" "${server_cmd[@]}"

ct() { chroot "$root" crosstune "$@"; }
wait_device() {  # wait_device KEY: until the tracker lists a device of KEY
  for _ in $(seq 1 600); do
    ct query --tracker "$tracker" --json 2>/dev/null | grep -q "\"key\": *\"$1\"" && return 0
    sleep 0.1
  done
  ct query --tracker "$tracker" || true
  fail "no device of key $1 registered"
}
wait_device deb-amd64
step "a lease and a session through the installed packages"
out=$(ct lease --tracker "$tracker" --key deb-amd64 --wait 60 -- crosstune info --json) ||
  fail "crosstune lease ... -- crosstune info failed: $out"
echo "$out" | grep -q '"arch": *"x86_64"' || fail "the leased session reported: $out"
ct query --tracker "$tracker" --json | grep -q '"outcome"' || fail "the tracker kept no session history"

# 4. The board packages: unpacked, their servers under qemu-user against the same tracker.
for pair in "arm64 aarch64 qemu-aarch64 /usr/aarch64-linux-gnu ${arm64_deb[0]}" \
  "armhf armv7l qemu-arm /usr/arm-linux-gnueabihf ${armhf_deb[0]}"; do
  read -r arch uname qemu sysroot deb <<<"$pair"
  step "the $arch .deb's server under $qemu"
  dpkg-deb -x "$deb" "$work/$arch"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$deb is not for $arch"
  conf="$work/$arch/etc/crosstune/server.conf"
  set_conf "$conf" tracker "\"$tracker\""
  set_conf "$conf" key "\"deb-$arch\""
  set_conf "$conf" port 0
  set_conf "$conf" work-dir "\"$work/$arch-work\""
  # The board's libraries from the cross sysroot only (tests/support/qemu_board.h says why).
  start_and_wait "$work/server-$arch.log" "$qemu" -L "$sysroot" -E "LD_LIBRARY_PATH=$sysroot/lib" \
    "$work/$arch/usr/bin/crosstune-server" --config "$conf"
  wait_device "deb-$arch"
  out=$(ct lease --tracker "$tracker" --key "deb-$arch" --wait 60 -- crosstune info --json) ||
    fail "a leased session on the $arch server failed: $out"
  echo "$out" | grep -q "\"arch\": *\"$uname\"" || fail "the $arch session reported: $out"
done
echo "deb_test: ok: lintian clean, installed, tracker + server from their units, sessions on amd64, arm64, armhf"
