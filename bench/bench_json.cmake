# Helpers for the benchmarks' smoke tests (cmake -P scripts): run a benchmark, then check the one
# JSON object it prints. A key path is a list of keys, written "a/b/c" in the check lists.
#
#   bench_run(OUT ...)                    runs the command, fails unless it exits 0 and prints JSON
#   bench_positive(JSON PATHS)            each path is a finite number > 0
#   bench_bounds(JSON CHECKS [FAILED_VAR])
#                                         each check is "PATH OP BOUND", OP one of < <= > >=, BOUND
#                                         a number or the path of one (a bound the JSON states);
#                                         with FAILED_VAR, a bound that does not hold sets it to
#                                         the failed checks instead of failing
#   bench_true(JSON PATHS)                each path is true

# Runs the command given after the arguments and stores its standard output in `out_var`.
function(bench_run out_var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nexited with ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
  string(JSON type ERROR_VARIABLE json_err TYPE "${out}")
  if(json_err OR NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "the output is not one JSON object: ${json_err}\n${out}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# Sets `value_var` to the number at `path` ("a/b/c"), failing unless it is one.
function(bench_number value_var json path)
  string(REPLACE "/" ";" keys "${path}")
  string(JSON type ERROR_VARIABLE err TYPE "${json}" ${keys})
  if(err)
    message(FATAL_ERROR "no '${path}' in the JSON: ${err}\n${json}")
  endif()
  if(NOT type STREQUAL "NUMBER")
    string(JSON text GET "${json}" ${keys})
    message(FATAL_ERROR "'${path}' is ${type} '${text}', not a number\n${json}")
  endif()
  string(JSON value GET "${json}" ${keys})
  set(${value_var} "${value}" PARENT_SCOPE)
endfunction()

# Every path in the "|"-separated `paths` must be a finite number above 0 (a rate or a ratio of
# two measured times: 0 means nothing was measured). JSON has no inf or NaN: a number is finite.
function(bench_positive json paths)
  string(REPLACE "|" ";" paths "${paths}")
  foreach(path IN LISTS paths)
    bench_number(value "${json}" "${path}")
    if(NOT value GREATER 0)
      message(FATAL_ERROR "'${path}' = ${value}, not above 0\n${json}")
    endif()
    message(STATUS "${path} = ${value}")
  endforeach()
endfunction()

# Every check in the "|"-separated `checks` ("PATH OP BOUND") must hold; given a third argument,
# the name of a variable, the checks that do not hold are stored there (empty when all hold).
function(bench_bounds json checks)
  set(failed FALSE)
  set(failed_checks)
  string(REPLACE "|" ";" checks "${checks}")
  foreach(check IN LISTS checks)
    if(NOT check MATCHES "^(.+) (<|<=|>|>=) (.+)$")
      message(FATAL_ERROR "bad check '${check}' (want 'PATH OP BOUND')")
    endif()
    set(path "${CMAKE_MATCH_1}")
    set(op "${CMAKE_MATCH_2}")
    set(bound "${CMAKE_MATCH_3}")
    if(NOT bound MATCHES "^[0-9.eE+-]+$")  # a bound the benchmark states itself
      bench_number(bound "${json}" "${bound}")
    endif()
    bench_number(value "${json}" "${path}")
    if(op STREQUAL "<")
      set(ok FALSE)
      if(value LESS bound)
        set(ok TRUE)
      endif()
    elseif(op STREQUAL "<=")
      set(ok FALSE)
      if(NOT value GREATER bound)
        set(ok TRUE)
      endif()
    elseif(op STREQUAL ">")
      set(ok FALSE)
      if(value GREATER bound)
        set(ok TRUE)
      endif()
    else()
      set(ok FALSE)
      if(NOT value LESS bound)
        set(ok TRUE)
      endif()
    endif()
    if(ok)
      message(STATUS "${path} = ${value} (${op} ${bound})")
    elseif(ARGC GREATER 2)
      message(STATUS "${path} = ${value}, not ${op} ${bound}")
      list(APPEND failed_checks "${path} = ${value}, not ${op} ${bound}")
    else()
      message(SEND_ERROR "'${path}' = ${value}, not ${op} ${bound}")
      set(failed TRUE)
    endif()
  endforeach()
  if(ARGC GREATER 2)
    set(${ARGV2} "${failed_checks}" PARENT_SCOPE)
    return()
  endif()
  if(failed)  # every bound was checked first, so one run shows all that failed
    message(FATAL_ERROR "a bound does not hold\n${json}")
  endif()
endfunction()

# Every path in the "|"-separated `paths` must be true.
function(bench_true json paths)
  string(REPLACE "|" ";" paths "${paths}")
  foreach(path IN LISTS paths)
    string(REPLACE "/" ";" keys "${path}")
    string(JSON value ERROR_VARIABLE err GET "${json}" ${keys})
    if(err)
      message(FATAL_ERROR "no '${path}' in the JSON: ${err}\n${json}")
    elseif(NOT value STREQUAL "ON")
      message(FATAL_ERROR "'${path}' is ${value}, not true\n${json}")
    endif()
    message(STATUS "${path} = true")
  endforeach()
endfunction()
