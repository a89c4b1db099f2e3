# crosstune_onnx_proto: the ONNX reader, generated at build time by Debian's protoc from Debian's
# onnx.proto (libonnx-dev), which asks for the lite runtime: only libprotobuf-lite is linked, and
# nothing of ONNX is committed here. Used by model/ and by the fuzz build's fuzz_onnx.
find_program(PROTOC_EXECUTABLE protoc REQUIRED)
find_file(ONNX_PROTO onnx/onnx.proto PATHS /usr/include REQUIRED)
find_library(PROTOBUF_LITE_LIBRARY protobuf-lite REQUIRED)
find_path(PROTOBUF_INCLUDE_DIR google/protobuf/message_lite.h REQUIRED)

set(_ct_onnx_out ${CMAKE_CURRENT_BINARY_DIR}/onnx_proto)
get_filename_component(_ct_onnx_dir ${ONNX_PROTO} DIRECTORY)
add_custom_command(
  OUTPUT ${_ct_onnx_out}/onnx.pb.cc ${_ct_onnx_out}/onnx.pb.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_ct_onnx_out}
  COMMAND ${PROTOC_EXECUTABLE} --cpp_out=${_ct_onnx_out} -I ${_ct_onnx_dir} ${ONNX_PROTO}
  DEPENDS ${ONNX_PROTO}
  COMMENT "protoc: the ONNX reader from ${ONNX_PROTO}")
# The generated code is not ours: its own warnings stay out of the project's.
add_library(crosstune_onnx_proto STATIC ${_ct_onnx_out}/onnx.pb.cc)
target_include_directories(crosstune_onnx_proto SYSTEM PUBLIC
  $<BUILD_INTERFACE:${_ct_onnx_out}> $<BUILD_INTERFACE:${PROTOBUF_INCLUDE_DIR}>)
target_compile_options(crosstune_onnx_proto PRIVATE -w)
target_link_libraries(crosstune_onnx_proto PUBLIC ${PROTOBUF_LITE_LIBRARY})
