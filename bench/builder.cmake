# crosstune-bench-builder: the builder's worker pool vs clang -c + ld.lld -shared subprocesses.
if(NOT TARGET crosstune::builder)
  return()
endif()
find_program(CT_BENCH_CLANG NAMES clang-14 clang)
find_program(CT_BENCH_LLD NAMES ld.lld-14 ld.lld)
add_executable(crosstune-bench-builder ${CMAKE_CURRENT_LIST_DIR}/bench_builder.cc)
target_link_libraries(crosstune-bench-builder PRIVATE crosstune::builder)
if(TARGET crosstune-build-worker)  # what the pool's workers run
  add_dependencies(crosstune-bench-builder crosstune-build-worker)
endif()
target_compile_definitions(crosstune-bench-builder PRIVATE
  CT_CLANG="${CT_BENCH_CLANG}" CT_LLD="${CT_BENCH_LLD}"
  CT_CLANG_RESOURCE_DIR="${CROSSTUNE_CLANG_RESOURCE_DIR}")
if(BUILD_TESTING)
  # The pool's builds per second over the subprocesses', same variants, alternated: 2.6-3.5
  # here with 2 workers, idle or at load 7 (the in-process compiler spares clang's and lld's
  # start-up); a pool doing each build twice measured 1.56-1.89, hence 2.0. The pool runs
  # crosstune-build-worker, so that must be this build's.
  add_test(NAME bench_builder_smoke
    COMMAND ${CMAKE_COMMAND} "-DPOSITIVE=pool_builds_per_s|subprocess_builds_per_s|speedup"
      "-DBOUNDS=speedup > 2.0" -P ${CMAKE_CURRENT_LIST_DIR}/check_bench_json.cmake --
      $<TARGET_FILE:crosstune-bench-builder> --variants 6 --workers 2)
  set_tests_properties(bench_builder_smoke PROPERTIES LABELS slow TIMEOUT 120)
endif()
