# crosstune-bench-farm (tuning on a simulated farm through the real tracker; issue 26 part 4),
# over the simulated boards and build workers of bench/sim_tools.cmake.
if(NOT TARGET crosstune-sim-device)
  return()
endif()
add_executable(crosstune-bench-farm ${CMAKE_CURRENT_LIST_DIR}/bench_farm.cc)
target_link_libraries(crosstune-bench-farm PRIVATE crosstune::tuner)
add_dependencies(crosstune-bench-farm crosstune-sim-device crosstune-sim-build-worker crosstune-tracker)
# The shared Kernel Tuner space lives beside the project, never copied into it.
target_compile_definitions(crosstune-bench-farm PRIVATE
  CT_DEFAULT_TRACKER="$<TARGET_FILE:crosstune-tracker>"
  CT_DEFAULT_SIM_DEVICE="$<TARGET_FILE:crosstune-sim-device>"
  CT_DEFAULT_SIM_BUILD_WORKER="$<TARGET_FILE:crosstune-sim-build-worker>"
  CT_DEFAULT_KT_SPACE="${PROJECT_SOURCE_DIR}/../shared/tuning-spaces/benchmark_hub-pnpoly-RTX_3090.json.gz")
if(BUILD_TESTING)
  # Three boards, twelve short trials on the tests' small Kernel Tuner cache: the JSON must come
  # out with every figure, and the trials per second over the boards' capacity (their recorded
  # times) hold (bench/check_farm_json.cmake).
  add_test(NAME bench_farm_smoke
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:crosstune-bench-farm>
            -DSPACE=${PROJECT_SOURCE_DIR}/tests/tuner/data/matmul-kt-cache.json
            -P ${CMAKE_CURRENT_LIST_DIR}/check_farm_json.cmake)
  set_tests_properties(bench_farm_smoke PROPERTIES LABELS slow TIMEOUT 120)
endif()
