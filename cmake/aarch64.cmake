# Toolchain for crosstune-server on 64-bit ARM Linux boards (Debian g++-aarch64-linux-gnu).
#   cmake --preset aarch64 && cmake --build --preset aarch64
#   qemu-aarch64 -L /usr/aarch64-linux-gnu build/aarch64/rpc_server/crosstune-server
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CROSSTUNE_CROSS_TRIPLE aarch64-linux-gnu)
set(CROSSTUNE_CROSS_DEB_ARCH arm64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-toolchain.cmake)
