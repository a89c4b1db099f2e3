# crosstune-sim-device (a crosstune-server whose kernels answer from a recorded table) and
# crosstune-bench-farm (tuning on a simulated farm through the real tracker; issue 26 part 4).
if(NOT TARGET crosstune::tuner OR NOT TARGET crosstune-tracker)
  return()
endif()
add_executable(crosstune-sim-device ${CMAKE_CURRENT_LIST_DIR}/sim_device.cc)
target_link_libraries(crosstune-sim-device PRIVATE crosstune::server crosstune::tuner)
