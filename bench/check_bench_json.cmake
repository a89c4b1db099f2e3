# A benchmark's smoke test: runs the command given after "--", which must exit 0 and print one
# JSON object, and checks that object (bench/bench_json.cmake):
#   -DPOSITIVE="a|b/c"        rates and ratios: each a finite number above 0
#   -DBOUNDS="a/b > 1.5|c < 4"  the same-run ratios the benchmark exists to show, each within a
#                             bound loose enough for a noisy shared machine (the test says why)
#   -DTRUE="a"                flags that must be true
#   -DSKIP_WHEN="a/skipped"   a key the benchmark writes when it could not measure, and
#   -DSKIP_MATCH="^absent: "  the reasons that are a skip (an input outside the checkout is
#                             absent): the text is printed after "bench-check: SKIP:" and nothing
#                             is checked (the test's SKIP_REGULAR_EXPRESSION turns that line into
#                             ctest's skip); any other reason (a file that does not load) fails
include(${CMAKE_CURRENT_LIST_DIR}/bench_json.cmake)
set(command)
set(after FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(after)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "usage: cmake [-DPOSITIVE=..] [-DBOUNDS=..] [-DTRUE=..] -P check_bench_json.cmake -- BENCH ARGS...")
endif()
bench_run(out ${command})
if(DEFINED SKIP_WHEN)
  string(REPLACE "/" ";" _skip_keys "${SKIP_WHEN}")
  string(JSON _skip_why ERROR_VARIABLE _skip_err GET "${out}" ${_skip_keys})
  if(NOT _skip_err)
    if(NOT DEFINED SKIP_MATCH OR NOT _skip_why MATCHES "${SKIP_MATCH}")
      message(FATAL_ERROR "the benchmark did not measure: ${_skip_why}\n${out}")
    endif()
    message(STATUS "bench-check: SKIP: ${_skip_why}")
    return()
  endif()
endif()
if(DEFINED POSITIVE)
  bench_positive("${out}" "${POSITIVE}")
endif()
if(DEFINED BOUNDS)
  bench_bounds("${out}" "${BOUNDS}")
endif()
if(DEFINED TRUE)
  bench_true("${out}" "${TRUE}")
endif()
