#!/usr/bin/env bash
# Installs every Debian package crosstune needs to build, test, benchmark and cross-deploy.
# Idempotent: packages already present are left alone. Run as root (CI does).
#   scripts/install-deps.sh            apt, tvm, python and model (what scripts/test.sh needs)
#   scripts/install-deps.sh PART...    only these parts:
#     apt              the Debian packages, the arm64/armhf OpenSSL sysroots and board runtimes
#     tvm              Apache TVM in a venv (the tvm tests, the TVM benchmark)
#     python           the Python package's build and test venv, and a wheelhouse of its
#                      build requirements (pip builds the wheel from it without PyPI)
#     model            onnx, onnxruntime, openvino in a venv (model tests, the demo's model step)
#     riscv64-openssl  libcrypto for the riscv64 server, built from Debian's source (minutes):
#                      not in the default set; the riscv64 server's build runs this part itself
#                      the first time it is built (cmake/CrossServers.cmake), and it is kept
set -euo pipefail

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(apt tvm python model)
for part in "${parts[@]}"; do
  case $part in
    apt | tvm | python | model | riscv64-openssl) ;;
    *)
      echo "install-deps: unknown part '$part' (apt, tvm, python, model, riscv64-openssl)" >&2
      exit 2
      ;;
  esac
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy python3-venv
  python3-dev
  libboost-dev libmsgpack-cxx-dev libdlpack-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libssl-dev libsqlite3-dev
  # The farm's records in PostgreSQL (crosstune-tracker --records-db): libpq to build against, the
  # server and its client programs for the tests, which start a server of their own.
  libpq-dev postgresql
  llvm-14-dev libclang-14-dev clang-14 liblld-14-dev lld-14 lld
  libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes (fuzz, asan, tsan presets)
  libxgboost-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  g++-aarch64-linux-gnu g++-arm-linux-gnueabihf g++-riscv64-linux-gnu qemu-user
  libsystemd-dev  # sd_notify: the server tells systemd it is ready (Type=notify)
  lintian mmdebstrap  # the .deb tests: lintian on every package, a throwaway Debian root to install into
  libopenblas-dev libdnnl-dev
  chromium iproute2 procps
  # Models: protoc generates the ONNX reader from Debian's onnx.proto at build time (host only,
  # linked against libprotobuf-lite); the testdata package holds per-operator reference tests.
  libonnx-dev protobuf-compiler libprotobuf-dev libonnx-testdata
)
# OpenSSL for the cross-built ARM servers (SHA-256 and HMAC come from libcrypto on every target).
# Installing libssl-dev:arm64 through multiarch would pin it to the host's exact version, so the
# foreign .debs are unpacked into a sysroot of their own that cmake/aarch64.cmake and armhf.cmake use.
CROSS_SYSROOT=${CROSSTUNE_CROSS_SYSROOT:-/opt/crosstune/cross}

missing=()
for p in "${packages[@]}"; do
  # No `| grep -q` under pipefail: grep leaving early can fail the pipeline (SIGPIPE).
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != *"install ok installed"* ]]; then
    missing+=("$p")
  fi
done

cross_missing=()
for arch in arm64 armhf; do
  [ -f "$CROSS_SYSROOT/$arch/.complete" ] || cross_missing+=("$arch")
done

# The boards' C and C++ runtime packages (libc6, libstdc++6, libgcc-s1 for arm64 and armhf), for
# dpkg-shlibdeps only: the board .debs' Depends come from their symbols files
# (cmake/CrosstuneDebian.cmake). Unpacked with their control files (dpkg-deb -R) into
# $CROSS_SYSROOT/<arch>/runtime/<package>, never installed: a multiarch libc6:arm64 on this
# machine is found by the cross sysroot's loader under qemu (through /etc/ld.so.cache) and
# breaks the qemu servers.
BOARD_RUNTIME=(libc6 libstdc++6 libgcc-s1)
unpack_board_runtime() {
  local arch tmp deb
  for arch in arm64 armhf; do
    [ -f "$CROSS_SYSROOT/$arch/runtime/.complete" ] && continue
    echo "install-deps: unpacking the $arch runtime packages into $CROSS_SYSROOT/$arch/runtime"
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq "${BOARD_RUNTIME[@]/%/:$arch}")
    $SUDO rm -rf "$CROSS_SYSROOT/$arch/runtime"
    $SUDO mkdir -p "$CROSS_SYSROOT/$arch/runtime"
    for deb in "$tmp"/*.deb; do
      $SUDO dpkg-deb -R "$deb" "$CROSS_SYSROOT/$arch/runtime/$(dpkg-deb -f "$deb" Package)"
    done
    $SUDO touch "$CROSS_SYSROOT/$arch/runtime/.complete"
    rm -rf "$tmp"
  done
}

# OpenSSL for the riscv64 server. Debian 12 has no riscv64 archive, so there is no libssl-dev to
# unpack: Debian's own source package (with Debian's patches) is configured for linux64-riscv64
# and its libcrypto.a built with the riscv64 cross compiler, once (7 min on 2 busy cores); the stamp
# names the version built. Not part of the default set: the riscv64 server's build asks for it.
# A mirror in the middle of a sync can fail one index ("File has unexpected size ... Mirror sync
# in progress?"): retry, then go on with what was fetched. A package or source whose index did
# come is found; one whose index did not fails later, by name.
apt_update() {
  local try
  for try in 1 2 3; do
    if $SUDO apt-get update -qq; then return 0; fi
    echo "install-deps: apt-get update failed (try $try)" >&2
    [ "$try" -lt 3 ] && sleep 5
  done
  echo "install-deps: apt-get update failed 3 times; going on with the indexes it fetched" >&2
}

build_riscv64_openssl() {
  local root="$CROSS_SYSROOT/riscv64" tmp lock
  [ -f "$root/.complete" ] && return 0
  command -v riscv64-linux-gnu-gcc >/dev/null || return 0
  # Two build trees may ask at once (the build runs this part): one builds, the other waits.
  exec {lock}>"${TMPDIR:-/tmp}/crosstune-riscv64-openssl.lock"
  flock "$lock"
  [ -f "$root/.complete" ] && return 0
  if ! apt-get source --print-uris openssl >/dev/null 2>&1; then
    # No deb-src entries: add them for the same mirrors and suites as the binary ones.
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
        $SUDO tee /etc/apt/sources.list.d/crosstune-deb-src.sources >/dev/null
    else
      grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
        $SUDO tee /etc/apt/sources.list.d/crosstune-deb-src.list >/dev/null
    fi
    apt_update
  fi
  echo "install-deps: building OpenSSL (Debian's source package) for riscv64 into $root"
  tmp=$(mktemp -d)
  (
    cd "$tmp"
    # The newest source first; a mirror that lacks the security suite's sources has the release's.
    apt-get source -qq openssl >/dev/null 2>&1 ||
      apt-get source -qq "openssl/$(. /etc/os-release && echo "$VERSION_CODENAME")" >/dev/null
    cd openssl-*/
    dpkg-parsechangelog -S Version >"$tmp/version"
    # Only what the server uses: libcrypto (SHA-256, HMAC, RAND_bytes), static, no programs.
    ./Configure linux64-riscv64 --cross-compile-prefix=riscv64-linux-gnu- \
      --prefix="$root/usr" --libdir=lib no-shared no-tests no-module no-engine \
      no-dso no-legacy >/dev/null
    make -s -j"$(nproc)" build_generated >/dev/null
    make -s -j"$(nproc)" libcrypto.a >/dev/null
    $SUDO mkdir -p "$root/usr/lib" "$root/usr/include"
    $SUDO cp libcrypto.a "$root/usr/lib/"
    $SUDO cp -r include/openssl "$root/usr/include/"
  )
  echo "openssl $(cat "$tmp/version")" | $SUDO tee "$root/.complete" >/dev/null
  rm -rf "$tmp"
}

# Apache TVM (pinned) in a virtual environment of its own, for the `tvm` tests and the TVM
# benchmark: crosstune-tracker serves TVM's RPC servers and clients, and is compared with TVM's
# own tracker. The newest apache-tvm-ffi crashes this TVM, so it is pinned; cloudpickle (TVM's RPC
# server) and tornado (TVM's tracker) are needed but not declared by the wheel. ~600 MB.
TVM_VENV=${CROSSTUNE_TVM_VENV:-/opt/crosstune/tvm-venv}
TVM_PINS=(apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 cloudpickle tornado)
install_tvm_venv() {
  local stamp="$TVM_VENV/.crosstune-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${TVM_PINS[*]}" ]; then
    echo "install-deps: TVM venv present at $TVM_VENV"
    return 0
  fi
  echo "install-deps: installing ${TVM_PINS[*]} into $TVM_VENV"
  $SUDO mkdir -p "$(dirname "$TVM_VENV")"
  $SUDO /usr/bin/python3 -m venv "$TVM_VENV"
  $SUDO "$TVM_VENV/bin/pip" install -q "${TVM_PINS[@]}"
  "$TVM_VENV/bin/python" -c "import tvm, tvm.rpc" >/dev/null
  echo "${TVM_PINS[*]}" | $SUDO tee "$stamp" >/dev/null
}

# The Python package (python/): its build requirements (nanobind, scikit-build-core), its tests
# (pytest, mypy, nbformat for the example notebook), numpy, tqdm and matplotlib (run.plot()), and
# the documentation's Sphinx, MyST parser and sphinx-autoapi (docs/: the newest releases that run
# on Debian 12's Python 3.11), and lizard (scripts/check-style.sh: the tuner's function lengths),
# in a virtual environment of its own made from Debian's python3 (whose headers python3-dev
# gives). The default build finds it there (CROSSTUNE_PYTHON_VENV) and builds the package with
# it; scripts/test.sh builds the docs with its sphinx-build.
PY_VENV=${CROSSTUNE_PYTHON_VENV:-/opt/crosstune/python-venv}
PY_PINS=(nanobind==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0 mypy==2.4.1 numpy==2.4.6
         tqdm==4.70.1 nbformat==5.11.1 matplotlib==3.11.2
         sphinx==9.0.4 myst-parser==5.2.0 sphinx-autoapi==3.9.0 lizard==1.24.3)
# pyproject.toml's [build-system] requires, at the venv's versions.
PY_BUILD_PINS=()
for pin in "${PY_PINS[@]}"; do
  case ${pin%%==*} in nanobind | scikit-build-core | numpy) PY_BUILD_PINS+=("$pin") ;; esac
done
install_python_venv() {
  local stamp="$PY_VENV/.crosstune-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PY_PINS[*]}" ]; then
    echo "install-deps: Python package venv present at $PY_VENV"
    return 0
  fi
  echo "install-deps: installing ${PY_PINS[*]} into $PY_VENV"
  $SUDO mkdir -p "$(dirname "$PY_VENV")"
  $SUDO /usr/bin/python3 -m venv "$PY_VENV"
  $SUDO "$PY_VENV/bin/pip" install -q "${PY_PINS[@]}"
  "$PY_VENV/bin/python" -c "import nanobind, scikit_build_core, pytest, mypy, numpy, sphinx, myst_parser, autoapi, lizard" >/dev/null
  echo "${PY_PINS[*]}" | $SUDO tee "$stamp" >/dev/null
}

# The build requirements as wheels (with what they need in turn), in a folder pip reads instead
# of PyPI: `pip wheel --no-index --find-links "$PY_WHEELHOUSE" .` builds the package with build
# isolation (pip's default, as a user runs it) and no network; the python.wheel test does.
PY_WHEELHOUSE=${CROSSTUNE_PYTHON_WHEELHOUSE:-/opt/crosstune/wheels}
install_python_wheelhouse() {
  local stamp="$PY_WHEELHOUSE/.crosstune-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PY_BUILD_PINS[*]}" ]; then
    echo "install-deps: Python build requirements present in $PY_WHEELHOUSE"
    return 0
  fi
  echo "install-deps: downloading ${PY_BUILD_PINS[*]} into $PY_WHEELHOUSE"
  $SUDO rm -rf "$PY_WHEELHOUSE"
  $SUDO mkdir -p "$PY_WHEELHOUSE"
  $SUDO "$PY_VENV/bin/pip" download -q --only-binary=:all: -d "$PY_WHEELHOUSE" "${PY_BUILD_PINS[@]}"
  echo "${PY_BUILD_PINS[*]}" | $SUDO tee "$stamp" >/dev/null
}

# onnx (writes the test models: scripts/make-model.py), onnxruntime (the reference outputs),
# openvino (the second baseline of crosstune-bench-model), numpy and sympy (onnxruntime's
# transformer optimizer needs it: the com.microsoft model tests), pinned, in a virtual
# environment of their own. ~300 MB.
MODEL_VENV=${CROSSTUNE_MODEL_VENV:-/opt/crosstune/model-venv}
MODEL_PINS=(onnx==1.23.2 onnxruntime==1.32.0 openvino==2026.4.1 numpy==2.3.5 sympy==1.14.0)
install_model_venv() {
  local stamp="$MODEL_VENV/.crosstune-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${MODEL_PINS[*]}" ]; then
    echo "install-deps: model venv present at $MODEL_VENV"
    return 0
  fi
  echo "install-deps: installing ${MODEL_PINS[*]} into $MODEL_VENV"
  $SUDO mkdir -p "$(dirname "$MODEL_VENV")"
  $SUDO /usr/bin/python3 -m venv "$MODEL_VENV"
  $SUDO "$MODEL_VENV/bin/pip" install -q "${MODEL_PINS[@]}"
  "$MODEL_VENV/bin/python" -c "import onnx, onnxruntime, openvino, numpy" >/dev/null
  echo "${MODEL_PINS[*]}" | $SUDO tee "$stamp" >/dev/null
}

install_apt() {
  if [ ${#missing[@]} -eq 0 ] && [ ${#cross_missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages and the arm64/armhf OpenSSL sysroots present"
    unpack_board_runtime
    return 0
  fi
  echo "install-deps: installing ${missing[*]}"
  for arch in arm64 armhf; do
    if ! grep -qx "$arch" <<<"$(dpkg --print-foreign-architectures)"; then
      $SUDO dpkg --add-architecture "$arch"
    fi
  done
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  for arch in "${cross_missing[@]}"; do
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq "libssl-dev:$arch" "libssl3:$arch")
    $SUDO mkdir -p "$CROSS_SYSROOT/$arch"
    for deb in "$tmp"/*.deb; do $SUDO dpkg -x "$deb" "$CROSS_SYSROOT/$arch"; done
    $SUDO touch "$CROSS_SYSROOT/$arch/.complete"
    rm -rf "$tmp"
  done
  unpack_board_runtime
}

for part in "${parts[@]}"; do
  case $part in
    apt) install_apt ;;
    tvm) install_tvm_venv ;;
    python)
      install_python_venv
      install_python_wheelhouse
      ;;
    model) install_model_venv ;;
    riscv64-openssl) build_riscv64_openssl ;;
  esac
done
echo "install-deps: done (${parts[*]})"
