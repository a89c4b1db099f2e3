# Debian packages, made by CPack from this build's install rules (the `debs` target runs
# `cpack -G DEB` into <build>/debs):
#   crosstune-server   the device server, /etc/crosstune/server.conf (a conffile), its systemd units
#                      and system user; every architecture (the aarch64/armhf cross builds make
#                      their own, see cmake/CrossServers.cmake)
#   crosstune-tracker  the tracker, /etc/crosstune/tracker.conf, its unit and user (host builds)
#   crosstune          the CLI, the libraries, headers, CMake and pkg-config files (host builds;
#                      the install rules without a component), and the build worker with
#                      /etc/crosstune/build-worker.conf, its unit (off until enabled) and user
# Dependencies come from dpkg-shlibdeps; the version is the project's. The unit files, conffiles,
# maintainer scripts and lintian overrides live in packaging/.
set(_ct_pkg ${PROJECT_SOURCE_DIR}/packaging)
set(_ct_pkg_out ${CMAKE_BINARY_DIR}/packaging)

# Files only a package installs: absolute destinations (/etc, /lib/systemd), so they stay out of a
# plain `cmake --install --prefix DIR` (EXCLUDE_FROM_ALL) and go in only when CPack asks for the
# component by name.
function(_ct_deb_common_files component package)
  # changelog.Debian.gz, compressed without a timestamp (lintian checks both).
  set(VERSION "${PROJECT_VERSION}-1")  # the packages' version (CPACK_DEBIAN_PACKAGE_RELEASE 1)
  configure_file(${_ct_pkg}/changelog ${_ct_pkg_out}/${package}/changelog.Debian @ONLY)
  execute_process(COMMAND gzip -n -9 -f ${_ct_pkg_out}/${package}/changelog.Debian)
  install(FILES ${_ct_pkg}/copyright ${_ct_pkg_out}/${package}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  install(FILES ${_ct_pkg}/${package}.README.Debian
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} RENAME README.Debian
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  if(EXISTS ${_ct_pkg}/${package}.lintian-overrides)
    install(FILES ${_ct_pkg}/${package}.lintian-overrides
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${package}
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
endfunction()

# Maintainer scripts for a package that runs `units` as the system user of `sysusers` (a file in
# packaging/); `enable` (yes/no): whether installing the package enables and starts them.
function(_ct_deb_unit_scripts component package sysusers units enable)
  install(FILES ${_ct_pkg}/${sysusers} DESTINATION lib/sysusers.d RENAME ${package}.conf
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  set(PACKAGE ${package})
  set(ENABLE ${enable})
  string(REPLACE ";" " " UNITS "${units}")
  set(scripts "")
  foreach(script postinst prerm postrm)
    configure_file(${_ct_pkg}/${script}.in ${_ct_pkg_out}/${package}/${script} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                    WORLD_READ WORLD_EXECUTE)
    list(APPEND scripts ${_ct_pkg_out}/${package}/${script})
  endforeach()
  set(${component}_SCRIPTS ${scripts} PARENT_SCOPE)
endfunction()

# A package whose units run at once on install, as its own system user.
function(_ct_deb_service_package component package units)
  _ct_deb_common_files(${component} ${package})
  _ct_deb_unit_scripts(${component} ${package} ${package}.sysusers "${units}" yes)
  set(${component}_SCRIPTS ${${component}_SCRIPTS} PARENT_SCOPE)
endfunction()

if(TARGET crosstune-server)
  install(FILES ${_ct_pkg}/server.conf DESTINATION /etc/crosstune COMPONENT server EXCLUDE_FROM_ALL)
  set(_ct_server_units crosstune-server.service crosstune-server-config.path)
  install(FILES ${_ct_pkg}/crosstune-server.service ${_ct_pkg}/crosstune-server-config.path
                ${_ct_pkg}/crosstune-server-config.service
          DESTINATION /lib/systemd/system COMPONENT server EXCLUDE_FROM_ALL)
  _ct_deb_service_package(server crosstune-server "${_ct_server_units}")
  file(WRITE ${_ct_pkg_out}/crosstune-server/conffiles "/etc/crosstune/server.conf\n")
  set(CPACK_DEBIAN_SERVER_PACKAGE_NAME crosstune-server)
  set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
  set(CPACK_DEBIAN_SERVER_DESCRIPTION
      "crosstune device server: runs and times uploaded compute kernels\n\
 crosstune-server serves a crosstune farm from one device: it registers\n\
 with the tracker named in /etc/crosstune/server.conf, takes sessions that\n\
 hold the tracker's lease token, and runs, checks and times the kernels\n\
 they upload, each session in its own process and workspace.")
  # libsystemd is loaded at run time for sd_notify (rpc_server/src/systemd.cc), so
  # dpkg-shlibdeps cannot see it; the units and the postinst need systemd itself.
  set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "libsystemd0, systemd, init-system-helpers (>= 1.52)")
  set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA ${server_SCRIPTS}
      ${_ct_pkg_out}/crosstune-server/conffiles)
  list(APPEND CPACK_COMPONENTS_ALL server)
endif()

if(TARGET crosstune-tracker)
  install(FILES ${_ct_pkg}/tracker.conf DESTINATION /etc/crosstune COMPONENT tracker
          EXCLUDE_FROM_ALL)
  install(FILES ${_ct_pkg}/crosstune-tracker.service DESTINATION /lib/systemd/system
          COMPONENT tracker EXCLUDE_FROM_ALL)
  _ct_deb_service_package(tracker crosstune-tracker crosstune-tracker.service)
  file(WRITE ${_ct_pkg_out}/crosstune-tracker/conffiles "/etc/crosstune/tracker.conf\n")
  set(CPACK_DEBIAN_TRACKER_PACKAGE_NAME crosstune-tracker)
  set(CPACK_DEBIAN_TRACKER_PACKAGE_SECTION net)
  set(CPACK_DEBIAN_TRACKER_DESCRIPTION
      "crosstune tracker: pools a farm of crosstune devices\n\
 crosstune-tracker keeps the devices of a crosstune farm (boards, hosts,\n\
 GPU servers), queues the people and CI jobs asking for them by key, grants\n\
 leases the devices enforce, and serves a status page and Prometheus\n\
 metrics.")
  set(CPACK_DEBIAN_TRACKER_PACKAGE_DEPENDS "systemd, init-system-helpers (>= 1.52)")
  set(CPACK_DEBIAN_TRACKER_PACKAGE_CONTROL_EXTRA ${tracker_SCRIPTS}
      ${_ct_pkg_out}/crosstune-tracker/conffiles)
  list(APPEND CPACK_COMPONENTS_ALL tracker)
endif()

if(TARGET crosstune)
  _ct_deb_common_files(Unspecified crosstune)
  set(_ct_unspecified_control)
  if(TARGET crosstune-build-worker)
    # The build worker as a service: shipped off (a developer's machine installs this package
    # for the CLI), enabled by the admin once /etc/crosstune/build-worker.conf says what to serve.
    install(FILES ${_ct_pkg}/build-worker.conf DESTINATION /etc/crosstune COMPONENT Unspecified
            EXCLUDE_FROM_ALL)
    install(FILES ${_ct_pkg}/crosstune-build-worker.service DESTINATION /lib/systemd/system
            COMPONENT Unspecified EXCLUDE_FROM_ALL)
    _ct_deb_unit_scripts(Unspecified crosstune crosstune-build-worker.sysusers
                         crosstune-build-worker.service no)
    file(WRITE ${_ct_pkg_out}/crosstune/conffiles "/etc/crosstune/build-worker.conf\n")
    set(_ct_unspecified_control ${Unspecified_SCRIPTS} ${_ct_pkg_out}/crosstune/conffiles)
  endif()
  set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_NAME crosstune)
  set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_SECTION devel)
  set(CPACK_DEBIAN_UNSPECIFIED_DESCRIPTION
      "crosstune: cross-deploy and auto-tune compute kernels on remote devices\n\
 The crosstune command builds kernels for a device with clang/LLVM or\n\
 NVRTC, uploads, runs and times them there, and tunes kernel templates with\n\
 an XGBoost cost model. With the C++ libraries, their headers, and CMake\n\
 and pkg-config files for find_package(crosstune).")
  # The public headers include these header-only libraries; the CMake package finds OpenSSL.
  set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_DEPENDS
      "libboost-dev, libmsgpack-cxx-dev, libdlpack-dev, nlohmann-json3-dev, libspdlog-dev, \
libfmt-dev, libssl-dev")
  if(_ct_unspecified_control)
    # deb-systemd-helper in the maintainer scripts; systemd itself only where the service runs.
    string(APPEND CPACK_DEBIAN_UNSPECIFIED_PACKAGE_DEPENDS ", init-system-helpers (>= 1.52)")
    set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_SUGGESTS systemd)
    set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_CONTROL_EXTRA ${_ct_unspecified_control})
  endif()
  set(CPACK_DEBIAN_UNSPECIFIED_PACKAGE_RECOMMENDS "crosstune-server (= ${PROJECT_VERSION})")
  list(APPEND CPACK_COMPONENTS_ALL Unspecified)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME crosstune)
set(CPACK_PACKAGE_VENDOR crosstune)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "crosstune maintainers <maintainers@crosstune.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "cross-deploy and auto-tune compute kernels")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/debs)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # fast to make; every dpkg reads it
set(CPACK_STRIP_FILES ON)
# CMake's stripped install strips executables and shared libraries but not static ones: strip
# the static libraries as Debian's policy asks (debug sections, .comment and .note, deterministic
# archive headers). The crosstune package went from 18.3 MB to 8.2 MB.
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    file(GLOB _ct_archives \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libcrosstune*.a\")
    foreach(_ct_archive IN LISTS _ct_archives)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --remove-section=.comment
                              --remove-section=.note --enable-deterministic-archives
                              \"\${_ct_archive}\"
                      RESULT_VARIABLE _ct_rc)
      if(NOT _ct_rc EQUAL 0)
        message(FATAL_ERROR \"strip --strip-debug \${_ct_archive} failed (\${_ct_rc})\")
      endif()
    endforeach()
  endif()")
set(CPACK_THREADS 0)
if(CMAKE_CROSSCOMPILING AND CROSSTUNE_CROSS_DEB_ARCH)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${CROSSTUNE_CROSS_DEB_ARCH})
endif()
# A board's package: dpkg-shlibdeps reads the binary as the board's architecture
# (DEB_HOST_ARCH) and finds its libraries in the board's own Debian runtime packages (libc6,
# libstdc++6, libgcc-s1), which scripts/install-deps.sh unpacks with their control files
# (dpkg-deb -R) into ${CROSSTUNE_CROSS_SYSROOT}/<deb-arch>/runtime/<package>: their symbols
# files give the Depends (libc6 (>= 2.34), ...), not the cross toolchain's libc6-arm64-cross.
# They are never installed on this machine: the host's multiarch libc6:arm64 would be found by
# the cross sysroot's loader under qemu through /etc/ld.so.cache.
if(CMAKE_CROSSCOMPILING AND CROSSTUNE_CROSS_DEB_ARCH)
  set(_ct_runtime ${CROSSTUNE_CROSS_SYSROOT}/${CROSSTUNE_CROSS_DEB_ARCH}/runtime)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)
  foreach(pkg libc6 libstdc++6 libgcc-s1)
    foreach(dir lib usr/lib)
      if(IS_DIRECTORY ${_ct_runtime}/${pkg}/${dir}/${CROSSTUNE_CROSS_TRIPLE})
        list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
             ${_ct_runtime}/${pkg}/${dir}/${CROSSTUNE_CROSS_TRIPLE})
      endif()
    endforeach()
  endforeach()
  if(NOT CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS AND CROSSTUNE_CROSS_DEB_ARCH STREQUAL "riscv64")
    # Debian 12 has no riscv64 archive to take a board's runtime packages from: no riscv64 .deb
    # (the server itself builds and runs; README, riscv64 boards).
    message(STATUS "Debian packages: none for riscv64 (Debian 12 has no riscv64 archive)")
  elseif(NOT CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)
    message(WARNING "Debian packages: no ${CROSSTUNE_CROSS_DEB_ARCH} runtime packages in "
                    "${_ct_runtime}; the debs target will fail (run scripts/install-deps.sh)")
  endif()
endif()
include(CPack)

# `cmake --build <build> --target debs`: the packages, remade only when a packaged binary or a
# packaging file changed (ninja keeps the stamp).
file(GLOB _ct_pkg_files CONFIGURE_DEPENDS ${_ct_pkg}/*)
set(_ct_deb_targets)
foreach(t crosstune-server crosstune-tracker crosstune crosstune_cli_build crosstune-build-worker)
  if(TARGET ${t})
    list(APPEND _ct_deb_targets ${t})
  endif()
endforeach()
set(_ct_deb_inputs)
foreach(t ${_ct_deb_targets})
  list(APPEND _ct_deb_inputs $<TARGET_FILE:${t}>)
endforeach()
set(_ct_cpack_env)
if(CMAKE_CROSSCOMPILING AND CROSSTUNE_CROSS_DEB_ARCH)
  set(_ct_cpack_env ${CMAKE_COMMAND} -E env DEB_HOST_ARCH=${CROSSTUNE_CROSS_DEB_ARCH})
endif()
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/debs/.stamp
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${CMAKE_BINARY_DIR}/debs
  COMMAND ${_ct_cpack_env} ${CMAKE_CPACK_COMMAND} --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${CMAKE_BINARY_DIR}/debs/_CPack_Packages
  COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/debs/.stamp
  DEPENDS ${_ct_deb_targets} ${_ct_deb_inputs} ${_ct_pkg_files}
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "Debian packages (cpack -G DEB) into ${CMAKE_BINARY_DIR}/debs"
  VERBATIM)
add_custom_target(debs DEPENDS ${CMAKE_BINARY_DIR}/debs/.stamp)
# The board servers' .debs (arm64, armhf) come with the host's (cmake/CrossServers.cmake).
if(CROSSTUNE_CROSS_DEBS)
  add_dependencies(debs ${CROSSTUNE_CROSS_DEBS})
endif()
