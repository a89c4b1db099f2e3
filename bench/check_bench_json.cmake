# Runs crosstune-bench-rpc small and checks that it prints one JSON object with every figure.
execute_process(COMMAND ${BENCH} --mib 8 --rounds 1 --rtt-iters 200
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "crosstune-bench-rpc exited with ${rc}")
endif()
foreach(key raw_tcp_rtt_us raw_tcp_busy_poll_rtt_us rpc_call_rtt_us rpc_call_rtt_no_busy_poll_us
            raw_tcp_stream_mb_s upload_mb_s tensor_copy_mb_s rpc_over_raw_rtt
            rpc_no_busy_poll_over_raw_rtt rpc_over_raw_busy_poll_rtt upload_over_raw_stream
            upload_over_bound tensor_over_raw_stream)
  string(JSON value ERROR_VARIABLE err GET "${out}" ${key})
  if(err)
    message(FATAL_ERROR "no '${key}' in the JSON: ${err}\n${out}")
  endif()
  message(STATUS "${key} = ${value}")
endforeach()
