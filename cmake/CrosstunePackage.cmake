# The installed package, so another project can use the libraries:
#   find_package(crosstune CONFIG REQUIRED [COMPONENTS client server tracker builder tuner])
#   target_link_libraries(app PRIVATE crosstune::client)
# or, for the client library without CMake, pkg-config's crosstune-client.
#
# Each heavy dependency has its own export set, so a component pulls in only what its targets
# link: client and server need OpenSSL and threads; tracker adds SQLite (and libpq); builder adds LLVM, clang,
# lld (and NVRTC where it was built with it); tuner adds the builder's and XGBoost (found by
# cmake/crosstuneXGBoost.cmake, installed beside the config). No COMPONENTS means all of them.
include(CMakePackageConfigHelpers)

set(CROSSTUNE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/crosstune)
set(CROSSTUNE_COMPONENTS client server)
install(EXPORT crosstuneTargets NAMESPACE crosstune:: DESTINATION ${CROSSTUNE_CMAKE_DIR})
if(TARGET crosstune_tracker)
  list(APPEND CROSSTUNE_COMPONENTS tracker)
  if(NOT CROSSTUNE_TRACKER_LIBPQ)  # set by tracker/CMakeLists.txt when it links libpq
    set(CROSSTUNE_TRACKER_LIBPQ OFF)
  endif()
  install(EXPORT crosstuneTrackerTargets NAMESPACE crosstune:: DESTINATION ${CROSSTUNE_CMAKE_DIR})
endif()
if(TARGET crosstune_builder)
  list(APPEND CROSSTUNE_COMPONENTS builder)
  if(NOT CROSSTUNE_BUILDER_NVRTC)  # set by builder/CMakeLists.txt when it links NVRTC
    set(CROSSTUNE_BUILDER_NVRTC OFF)
  endif()
  install(EXPORT crosstuneBuilderTargets NAMESPACE crosstune:: DESTINATION ${CROSSTUNE_CMAKE_DIR})
endif()
if(TARGET crosstune_tuner)
  list(APPEND CROSSTUNE_COMPONENTS tuner)
  install(EXPORT crosstuneTunerTargets NAMESPACE crosstune:: DESTINATION ${CROSSTUNE_CMAKE_DIR})
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/crosstuneXGBoost.cmake DESTINATION ${CROSSTUNE_CMAKE_DIR})
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/crosstuneConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/crosstuneConfig.cmake
  INSTALL_DESTINATION ${CROSSTUNE_CMAKE_DIR})
# 0.x releases: only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/crosstuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/crosstuneConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/crosstuneConfigVersion.cmake
        DESTINATION ${CROSSTUNE_CMAKE_DIR})

if(TARGET crosstune_client)
  # Relocatable: the prefix is found from the .pc file's own place (install --prefix anywhere).
  file(RELATIVE_PATH CROSSTUNE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/crosstune-client.pc.in
                 ${CMAKE_CURRENT_BINARY_DIR}/crosstune-client.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/crosstune-client.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
