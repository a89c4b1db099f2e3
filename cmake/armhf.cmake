# Toolchain for crosstune-server on 32-bit ARM hard-float Linux boards (Debian
# g++-arm-linux-gnueabihf: ARMv7-A, VFPv3-D16, Thumb-2).
#   cmake --preset armhf && cmake --build --preset armhf
#   qemu-arm -L /usr/arm-linux-gnueabihf build/armhf/rpc_server/crosstune-server
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(CROSSTUNE_CROSS_TRIPLE arm-linux-gnueabihf)
set(CROSSTUNE_CROSS_DEB_ARCH armhf)
include(${CMAKE_CURRENT_LIST_DIR}/cross-toolchain.cmake)
