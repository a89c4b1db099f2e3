# crosstune-bench-tracker (owned by the tracker work; included from bench/CMakeLists.txt).
if(TARGET crosstune-tracker)
  add_executable(crosstune-bench-tracker ${CMAKE_CURRENT_LIST_DIR}/bench_tracker.cc)
  target_link_libraries(crosstune-bench-tracker PRIVATE crosstune::client)
  target_compile_definitions(crosstune-bench-tracker PRIVATE
    CT_DEFAULT_TRACKER="$<TARGET_FILE:crosstune-tracker>")
  add_dependencies(crosstune-bench-tracker crosstune-tracker)
  if(BUILD_TESTING)
    # A small, short run: the JSON must print and every request must be answered.
    add_test(NAME bench_tracker_smoke
      COMMAND crosstune-bench-tracker --servers 50 --clients 50 --rate 200 --paced-seconds 1
              --saturated-seconds 1)
    set_tests_properties(bench_tracker_smoke PROPERTIES LABELS slow TIMEOUT 60)
  endif()
endif()
