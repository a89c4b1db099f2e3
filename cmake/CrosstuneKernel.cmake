# crosstune_add_kernel(<target> SOURCE <file.c> TRIPLE <triple> OUTPUT <file.so> [FLAGS ...])
#
# Builds a freestanding CPU module (kernel_abi.h) for any LLVM target with clang-14 and ld.lld,
# the way a user does by hand: no sysroot or cross toolchain needed. Used for the sample and
# benchmark kernels and the qemu tests (the builder library replaces this for real work).
find_program(CROSSTUNE_KERNEL_CLANG NAMES clang-14 clang)
find_program(CROSSTUNE_KERNEL_LLD NAMES ld.lld-14 ld.lld)

# Kernels may include only kernel_abi.h and dlpack.h: give them a directory holding just those,
# never the host's whole /usr/include.
set(CROSSTUNE_KERNEL_INCLUDE ${CMAKE_BINARY_DIR}/kernel-include)
if(NOT EXISTS ${CROSSTUNE_KERNEL_INCLUDE}/dlpack)
  file(MAKE_DIRECTORY ${CROSSTUNE_KERNEL_INCLUDE})
  file(CREATE_LINK ${DLPACK_INCLUDE}/dlpack ${CROSSTUNE_KERNEL_INCLUDE}/dlpack SYMBOLIC)
endif()

function(crosstune_add_kernel name)
  cmake_parse_arguments(K "" "SOURCE;TRIPLE;OUTPUT" "FLAGS" ${ARGN})
  if(NOT CROSSTUNE_KERNEL_CLANG OR NOT CROSSTUNE_KERNEL_LLD)
    message(STATUS "Kernel ${name}: skipped (needs clang-14 and ld.lld)")
    return()
  endif()
  get_filename_component(src ${K_SOURCE} ABSOLUTE)
  set(obj ${K_OUTPUT}.o)
  add_custom_command(OUTPUT ${K_OUTPUT}
    COMMAND ${CROSSTUNE_KERNEL_CLANG} --target=${K_TRIPLE} ${K_FLAGS}
            -ffreestanding -nostdlib -fPIC -O3
            "-DCT_KERNEL_TARGET=\"llvm -mtriple=${K_TRIPLE}\""
            -I${PROJECT_SOURCE_DIR}/formats/include -I${CROSSTUNE_KERNEL_INCLUDE}
            -c ${src} -o ${obj}
    COMMAND ${CROSSTUNE_KERNEL_LLD} -shared ${obj} -o ${K_OUTPUT}
    DEPENDS ${src} ${PROJECT_SOURCE_DIR}/formats/include/crosstune/kernel_abi.h
    COMMENT "Kernel ${name} (${K_TRIPLE})"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${K_OUTPUT})
endfunction()
