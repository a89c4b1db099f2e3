# Runs crosstune-bench-farm small and short and checks the one JSON object it prints: BENCH is
# the program, SPACE a recorded table. It must exit 0, hold every figure, count what it ran, and
# keep the boards busy (bench/bench_json.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/bench_json.cmake)
bench_run(out ${BENCH} --space ${SPACE} --devices 3 --trials 12 --trial-seconds 0.05
          --build-seconds 0.01 --tuner random --quality-seeds 2 --build-workers 1)
foreach(key devices build_workers trial_seconds space table_best cpu baseline farm quality)
  string(JSON value ERROR_VARIABLE err GET "${out}" ${key})
  if(err)
    message(FATAL_ERROR "no '${key}' in the JSON: ${err}\n${out}")
  endif()
endforeach()
foreach(key wall_s trials build_queue planning batch)
  string(JSON value ERROR_VARIABLE err GET "${out}" baseline ${key})
  if(err)
    message(FATAL_ERROR "no 'baseline.${key}' in the JSON: ${err}\n${out}")
  endif()
endforeach()
string(JSON value ERROR_VARIABLE err GET "${out}" farm build_queue)
if(err)
  message(FATAL_ERROR "no 'farm.build_queue' in the JSON: ${err}\n${out}")
endif()
bench_positive("${out}" "baseline/trials_per_s|baseline/capacity_per_s|baseline/device_busy_mean|baseline/device_busy_min|baseline/best_cost|farm/trials_per_s|farm/device_busy_mean|farm/device_busy_min|quality/n_over_one_median|baseline/planning/seconds|baseline/planning/proposed")
# The trials per second over what the boards could take (their recorded trial times), for the
# host-bound baseline and the farm with a build worker: 0.68-0.80 here, 0.61 beside the model
# benchmark (the simulated boards sleep); a board kept waiting 50 ms (one trial's time)
# before each trial measured 0.40, hence 0.45. And trials to 95% of the best with N boards over
# with one, on the replayed table (no timing): 1 here; 1.5 is N boards that search half again
# as long.
bench_bounds("${out}" "baseline/fraction_of_capacity > 0.45|farm/fraction_of_capacity > 0.45|quality/n_over_one_median < 1.5")
# The farm run's builds went to the host's pool and the one simulated build worker.
string(JSON services LENGTH "${out}" farm build_services)
if(NOT services EQUAL 2)
  message(FATAL_ERROR "the farm run had ${services} build services, not 2\n${out}")
endif()
string(JSON trials GET "${out}" baseline trials)
if(NOT trials EQUAL 12)
  message(FATAL_ERROR "the run measured ${trials} trials, not 12\n${out}")
endif()
foreach(key one_device n_devices)
  string(JSON value ERROR_VARIABLE err GET "${out}" quality ${key})
  if(err)
    message(FATAL_ERROR "no 'quality.${key}' in the JSON: ${err}\n${out}")
  endif()
endforeach()
