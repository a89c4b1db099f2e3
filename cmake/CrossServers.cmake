# Builds crosstune-server for the boards as part of the host build: this same source tree,
# configured again with cmake/<arch>.cmake, CROSSTUNE_SERVER_ONLY=ON and no tests. The results,
#   <build>/cross/aarch64/rpc_server/crosstune-server
#   <build>/cross/armhf/rpc_server/crosstune-server
#   <build>/cross/riscv64/rpc_server/crosstune-server  (when riscv64-linux-gnu-g++ and
#                                                       qemu-riscv64 are present)
# run under qemu-user as remote boards in the qemu tests and in scripts/demo.sh.
#
# Sets CROSSTUNE_CROSS_SERVER_<arch> (the binary's path) and CROSSTUNE_QEMU_<arch> for each
# architecture it builds.
include(ExternalProject)

find_program(CROSSTUNE_AARCH64_CXX aarch64-linux-gnu-g++)
find_program(CROSSTUNE_ARMHF_CXX arm-linux-gnueabihf-g++)
find_program(CROSSTUNE_QEMU_AARCH64 qemu-aarch64)
find_program(CROSSTUNE_QEMU_ARMHF qemu-arm)
find_program(CROSSTUNE_RISCV64_CXX riscv64-linux-gnu-g++)
find_program(CROSSTUNE_QEMU_RISCV64 qemu-riscv64)

set(_ct_cross_default OFF)
if(CROSSTUNE_AARCH64_CXX AND CROSSTUNE_ARMHF_CXX AND CROSSTUNE_QEMU_AARCH64 AND CROSSTUNE_QEMU_ARMHF)
  set(_ct_cross_default ON)
endif()
option(CROSSTUNE_CROSS_SERVERS "Also build crosstune-server for aarch64 and armhf (qemu tests)"
       ${_ct_cross_default})

if(NOT CROSSTUNE_CROSS_SERVERS)
  message(STATUS "Cross servers: off (needs aarch64-linux-gnu-g++, arm-linux-gnueabihf-g++, "
                 "qemu-aarch64 and qemu-arm; scripts/install-deps.sh installs them)")
  return()
endif()

if(DEFINED ENV{CROSSTUNE_CROSS_SYSROOT})
  set(_ct_cross_sysroot "$ENV{CROSSTUNE_CROSS_SYSROOT}")
else()
  set(_ct_cross_sysroot /opt/crosstune/cross)
endif()

# arch name:Debian arch of the OpenSSL sysroot
set(_ct_cross_arches aarch64:arm64 armhf:armhf)
if(CROSSTUNE_RISCV64_CXX AND CROSSTUNE_QEMU_RISCV64)
  list(APPEND _ct_cross_arches riscv64:riscv64)
else()
  message(STATUS "Cross servers: no riscv64 server (needs riscv64-linux-gnu-g++ and "
                 "qemu-riscv64; scripts/install-deps.sh installs them)")
endif()
set(CROSSTUNE_CROSS_DEBS)
foreach(pair ${_ct_cross_arches})
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 arch)
  list(GET pair 1 deb_arch)
  # riscv64's OpenSSL is built from Debian's source (minutes), so only when that server is first
  # built: a step before its configure (scripts/install-deps.sh riscv64-openssl; kept in the
  # sysroot afterwards). The arm64 and armhf ones are unpacked by install-deps.sh's apt part.
  set(_ct_openssl_step FALSE)
  if(arch STREQUAL "riscv64" AND NOT EXISTS ${_ct_cross_sysroot}/${deb_arch}/.complete)
    set(_ct_openssl_step TRUE)
  elseif(NOT EXISTS ${_ct_cross_sysroot}/${deb_arch}/usr/include/openssl/sha.h)
    message(WARNING "Cross servers: no ${deb_arch} OpenSSL in ${_ct_cross_sysroot}/${deb_arch}; "
                    "run scripts/install-deps.sh. Skipping the ${arch} server.")
    continue()
  endif()
  set(bin_dir ${CMAKE_BINARY_DIR}/cross/${arch})
  set(server ${bin_dir}/rpc_server/crosstune-server)
  # MinSizeRel (-Os): a board's server spends its time in the kernels it loads, which the builder
  # compiles at -O3; its own code (frames, sessions, the timing loop) needs no -O2. The aarch64
  # server compiled in 137 CPU-s against Release's 179 (-23%) and came out 6.2 MB against 6.8
  # (aarch64-linux-gnu-g++ 12, ccache off, AMD EPYC VM, 2026-12-05).
  ExternalProject_Add(crosstune-server-${arch}
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${bin_dir}
    CMAKE_GENERATOR ${CMAKE_GENERATOR}
    CMAKE_ARGS
      -DCMAKE_TOOLCHAIN_FILE=${PROJECT_SOURCE_DIR}/cmake/${arch}.cmake
      -DCMAKE_BUILD_TYPE=MinSizeRel
      -DCROSSTUNE_SERVER_ONLY=ON
      -DBUILD_TESTING=OFF
      -DCROSSTUNE_CROSS_SYSROOT=${_ct_cross_sysroot}
    # The sub-build tracks its own sources; let it decide what is out of date on every build.
    BUILD_ALWAYS TRUE
    # One cross build at a time: each already runs its own parallel jobs.
    USES_TERMINAL_BUILD TRUE
    USES_TERMINAL_CONFIGURE TRUE
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS ${server}
    EXCLUDE_FROM_ALL FALSE)
  if(_ct_openssl_step)
    ExternalProject_Add_Step(crosstune-server-${arch} openssl
      COMMENT "Building OpenSSL for ${arch} from Debian's source (once; kept in ${_ct_cross_sysroot})"
      COMMAND env CROSSTUNE_CROSS_SYSROOT=${_ct_cross_sysroot}
              bash ${PROJECT_SOURCE_DIR}/scripts/install-deps.sh riscv64-openssl
      DEPENDERS configure
      USES_TERMINAL TRUE)
  endif()
  string(TOUPPER ${arch} ARCH)
  set(CROSSTUNE_CROSS_SERVER_${ARCH} ${server})
  # The board's .deb (Debian has arm64 and armhf archives, so their dependencies resolve; riscv64
  # has none in Debian 12): <build>/cross/<arch>/debs, built on demand by the host's `debs`
  # target (cmake/CrosstuneDebian.cmake).
  if(NOT arch STREQUAL "riscv64")
    ExternalProject_Add_Step(crosstune-server-${arch} debs
      COMMAND ${CMAKE_COMMAND} --build ${bin_dir} --target debs
      DEPENDEES build
      ALWAYS TRUE
      EXCLUDE_FROM_MAIN TRUE
      USES_TERMINAL TRUE)
    ExternalProject_Add_StepTargets(crosstune-server-${arch} debs)
    list(APPEND CROSSTUNE_CROSS_DEBS crosstune-server-${arch}-debs)
  endif()
endforeach()
