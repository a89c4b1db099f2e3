# Shared part of the board toolchain files (aarch64.cmake, armhf.cmake and riscv64.cmake set
# CROSSTUNE_CROSS_TRIPLE and CROSSTUNE_CROSS_DEB_ARCH, then include this).
#
# Where things come from:
#  - compilers and the target's libc/libstdc++: Debian's g++-<triple> (sysroot /usr/<triple>);
#  - header-only libraries (Boost.Asio, msgpack, DLPack, CLI11, nlohmann, spdlog, fmt) and
#    systemd's sd-daemon.h (libsystemd is dlopen'ed at run time): the host's
#    /usr/include, through a small tree of symlinks laid out in the build directory so that only
#    those headers (never the host's libc or OpenSSL headers) are on the target's include path;
#  - OpenSSL: the target's libssl-dev unpacked (riscv64: built from Debian's source) by
#    scripts/install-deps.sh into ${CROSSTUNE_CROSS_SYSROOT}/<deb-arch> (default
#    /opt/crosstune/cross), libcrypto linked statically so the board (or qemu) needs nothing
#    beyond libc and libstdc++.

set(CMAKE_C_COMPILER ${CROSSTUNE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${CROSSTUNE_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${CROSSTUNE_CROSS_TRIPLE})

if(DEFINED ENV{CROSSTUNE_CROSS_SYSROOT})
  set(CROSSTUNE_CROSS_SYSROOT "$ENV{CROSSTUNE_CROSS_SYSROOT}")
elseif(NOT CROSSTUNE_CROSS_SYSROOT)
  set(CROSSTUNE_CROSS_SYSROOT /opt/crosstune/cross)
endif()
set(_ct_openssl_root ${CROSSTUNE_CROSS_SYSROOT}/${CROSSTUNE_CROSS_DEB_ARCH})
# try_compile projects re-read this file; pass the variables on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CROSSTUNE_CROSS_SYSROOT CROSSTUNE_HEADER_ROOT)

# The header-only tree: <build>/cross-headers/usr/include/{boost,msgpack.hpp,...} -> host headers.
if(NOT CROSSTUNE_HEADER_ROOT)
  set(CROSSTUNE_HEADER_ROOT ${CMAKE_BINARY_DIR}/cross-headers)
endif()
get_property(_ct_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)
if(NOT _ct_in_try_compile)
  set(CROSSTUNE_HEADER_ROOT ${CROSSTUNE_HEADER_ROOT} CACHE PATH
      "Tree of symlinks to the host's architecture-independent header-only libraries")
  foreach(entry boost msgpack.hpp msgpack dlpack CLI nlohmann spdlog fmt systemd)
    set(_ct_link ${CROSSTUNE_HEADER_ROOT}/usr/include/${entry})
    if(NOT EXISTS ${_ct_link} AND EXISTS /usr/include/${entry})
      file(MAKE_DIRECTORY ${CROSSTUNE_HEADER_ROOT}/usr/include)
      file(CREATE_LINK /usr/include/${entry} ${_ct_link} SYMBOLIC)
    endif()
  endforeach()
endif()

# Search only the target's roots for headers and libraries; programs come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${CROSSTUNE_CROSS_TRIPLE} ${_ct_openssl_root} ${CROSSTUNE_HEADER_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# OpenSSL: static libcrypto from the unpacked sysroot; its multiarch headers
# (openssl/configuration.h) sit in usr/include/<triple>, which FindOpenSSL does not add.
set(OPENSSL_ROOT_DIR ${_ct_openssl_root}/usr)
set(OPENSSL_USE_STATIC_LIBS TRUE)
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES ${_ct_openssl_root}/usr/include/${CROSSTUNE_CROSS_TRIPLE})
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${_ct_openssl_root}/usr/include/${CROSSTUNE_CROSS_TRIPLE})

# How to run the target's programs here (tests, try_run): qemu-user with the cross sysroot.
if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${CROSSTUNE_CROSS_TRIPLE})
elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "riscv64")
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -L /usr/${CROSSTUNE_CROSS_TRIPLE})
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/${CROSSTUNE_CROSS_TRIPLE})
endif()
