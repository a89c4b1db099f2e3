# Toolchain for crosstune-server on 64-bit RISC-V Linux boards (Debian g++-riscv64-linux-gnu,
# rv64gc, lp64d). Debian 12 has no riscv64 archive: `scripts/install-deps.sh riscv64-openssl` builds
# libcrypto from Debian's OpenSSL source package with this cross compiler into
# ${CROSSTUNE_CROSS_SYSROOT}/riscv64 (the host build's crosstune-server-riscv64 target runs it the
# first time; for the preset below, run it once yourself).
#   cmake --preset riscv64 && cmake --build --preset riscv64
#   qemu-riscv64 -L /usr/riscv64-linux-gnu build/riscv64/rpc_server/crosstune-server
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(CROSSTUNE_CROSS_TRIPLE riscv64-linux-gnu)
set(CROSSTUNE_CROSS_DEB_ARCH riscv64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-toolchain.cmake)
