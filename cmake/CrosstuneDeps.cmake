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
# msgpack without Boost containers; spdlog and fmt header-only so the ARM servers need no
# foreign-architecture builds of them.
target_compile_definitions(crosstune_thirdparty INTERFACE
  MSGPACK_NO_BOOST SPDLOG_HEADER_ONLY FMT_HEADER_ONLY SPDLOG_FMT_EXTERNAL BOOST_ASIO_NO_DEPRECATED)
target_link_libraries(crosstune_thirdparty INTERFACE OpenSSL::Crypto Threads::Threads ${CMAKE_DL_LIBS})
install(TARGETS crosstune_thirdparty EXPORT crosstuneTargets)
