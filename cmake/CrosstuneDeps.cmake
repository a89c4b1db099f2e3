# Third-party dependencies, all from Debian packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# Header-only libraries. In the ARM cross builds these come from the host's /usr/include through
# the small include tree cmake/cross-include.cmake lays out (they are architecture-independent).
find_path(BOOST_ASIO_INCLUDE boost/asio.hpp REQUIRED)
find_path(MSGPACK_INCLUDE msgpack.hpp REQUIRED)
find_path(DLPACK_INCLUDE dlpack/dlpack.h REQUIRED)
find_path(CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
find_path(NLOHMANN_INCLUDE nlohmann/json.hpp REQUIRED)
find_path(SPDLOG_INCLUDE spdlog/spdlog.h REQUIRED)
find_path(FMT_INCLUDE fmt/format.h REQUIRED)

add_library(crosstune_thirdparty INTERFACE)
target_include_directories(crosstune_thirdparty SYSTEM INTERFACE
  $<BUILD_INTERFACE:${BOOST_ASIO_INCLUDE}> $<BUILD_INTERFACE:${MSGPACK_INCLUDE}>
  $<BUILD_INTERFACE:${DLPACK_INCLUDE}> $<BUILD_INTERFACE:${CLI11_INCLUDE}>
  $<BUILD_INTERFACE:${NLOHMANN_INCLUDE}> $<BUILD_INTERFACE:${SPDLOG_INCLUDE}>
  $<BUILD_INTERFACE:${FMT_INCLUDE}>)
# msgpack without Boost containers.
target_compile_definitions(crosstune_thirdparty INTERFACE MSGPACK_NO_BOOST BOOST_ASIO_NO_DEPRECATED)
target_link_libraries(crosstune_thirdparty INTERFACE OpenSSL::Crypto Threads::Threads ${CMAKE_DL_LIBS})
# spdlog and fmt: Debian's compiled libraries on the host; header-only in the board builds, which
# have no foreign-architecture builds of them. Header-only costs every file that logs or formats:
# a file that logs one line compiles in 11.6 s at -O2 -g header-only against 4.9 s with the
# libraries, one that formats one string 4.8 s against 0.8 s (g++ 12, AMD EPYC VM, 2026-12-05).
if(CMAKE_CROSSCOMPILING)
  target_compile_definitions(crosstune_thirdparty INTERFACE
    SPDLOG_HEADER_ONLY FMT_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
else()
  find_package(fmt REQUIRED CONFIG)
  find_package(spdlog REQUIRED CONFIG)
  target_link_libraries(crosstune_thirdparty INTERFACE spdlog::spdlog fmt::fmt)
endif()
install(TARGETS crosstune_thirdparty EXPORT crosstuneTargets)
