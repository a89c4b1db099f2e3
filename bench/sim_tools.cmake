# The simulated farm's tools: crosstune-sim-device (a crosstune-server whose kernels answer from a
# recorded table) and crosstune-sim-build-worker (a build worker that answers from it too). They
# are test tools as much as benchmark ones (tests/tuner's sim_farm_test runs the boards), so the
# top-level CMakeLists.txt includes this file before tests/, also in the builds without the
# benchmarks (the sanitizer presets); bench/farm.cmake builds the farm benchmark over them.
if(NOT TARGET crosstune::tuner OR NOT TARGET crosstune-tracker OR NOT TARGET crosstune::build_worker)
  return()
endif()
add_executable(crosstune-sim-device ${CMAKE_CURRENT_LIST_DIR}/sim_device.cc)
target_link_libraries(crosstune-sim-device PRIVATE crosstune::server crosstune::tuner)

add_executable(crosstune-sim-build-worker ${CMAKE_CURRENT_LIST_DIR}/sim_build_worker.cc)
target_link_libraries(crosstune-sim-build-worker PRIVATE crosstune::build_worker crosstune::tuner)
# Where they were when bench/ built them (build/<preset>/bench), though this file is included
# from the top level.
set_target_properties(crosstune-sim-device crosstune-sim-build-worker PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
