# Definitions that hold a path of this checkout or build tree (CT_SERVER_BIN="/.../crosstune-server",
# CT_SCRIPTS_DIR="/.../scripts") go only to the source files that name them.
#
# Why: ccache serves an object only to a compile with the same command line, and such a path
# differs between two clones (CI clones afresh into its own folder; CCACHE_BASEDIR makes include
# paths relative, never the text of a -D). Given to a whole target, one path made every file of
# that target miss the cache in another clone: 84 of the main tree's 288 files. Given to the files
# that use it, only those miss.
#
# crosstune_narrow_path_definitions(DIR) walks DIR's targets and those of its subdirectories, after
# they are all defined (the top-level CMakeLists.txt calls it last). A definition stays on its
# target, as before, when no source file of the target names it or a header beside them (or a
# test helper's) does: a header may use it under #ifdef, where leaving it out would change what
# compiles rather than fail.
function(crosstune_narrow_path_definitions dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(defs ${target} COMPILE_DEFINITIONS)
    if(NOT defs)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(keep)
    set(moved FALSE)
    set(texts_read FALSE)
    foreach(def IN LISTS defs)
      if(NOT def MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
        list(APPEND keep "${def}")
        continue()
      endif()
      set(name ${CMAKE_MATCH_1})
      set(value "${CMAKE_MATCH_2}")
      # A path of the checkout or the build tree; system paths (/usr/bin/clang-14) are the same
      # in every clone and stay where they are.
      string(FIND "${value}" "${PROJECT_SOURCE_DIR}" in_source)
      string(FIND "${value}" "${PROJECT_BINARY_DIR}" in_build)
      string(FIND "${value}" "$<TARGET_FILE" target_file)
      if(in_source EQUAL -1 AND in_build EQUAL -1 AND target_file EQUAL -1)
        list(APPEND keep "${def}")
        continue()
      endif()
      if(NOT texts_read)
        # Read once per target: the headers beside its sources and the test helpers' (any
        # source may include them), and each C/C++ source (by full path: a relative one would be
        # read against the calling directory).
        file(GLOB headers "${source_dir}/*.h" "${PROJECT_SOURCE_DIR}/tests/support/*.h"
             "${PROJECT_SOURCE_DIR}/tests/support/crosstune/testing/*.h")
        set(header_text "")
        foreach(h IN LISTS headers)
          file(READ "${h}" text)
          string(APPEND header_text "${text}")
        endforeach()
        set(paths)
        foreach(src IN LISTS sources)
          if(src MATCHES "^\\$<" OR NOT src MATCHES "\\.(cc|cpp|c)$")
            continue()
          endif()
          if(IS_ABSOLUTE "${src}")
            set(path "${src}")
          else()
            set(path "${source_dir}/${src}")
          endif()
          if(EXISTS "${path}")
            list(LENGTH paths i)
            list(APPEND paths "${path}")
            file(READ "${path}" source_text_${i})
          endif()
        endforeach()
        set(texts_read TRUE)
      endif()
      set(word "(^|[^A-Za-z0-9_])${name}([^A-Za-z0-9_]|$)")
      # A header that names it may be included by any source, perhaps under #ifdef, where
      # leaving it out would change what compiles rather than fail: the target keeps it.
      if(header_text MATCHES "${word}")
        list(APPEND keep "${def}")
        continue()
      endif()
      set(users)
      set(i 0)
      foreach(path IN LISTS paths)
        if(source_text_${i} MATCHES "${word}")
          list(APPEND users "${path}")
        endif()
        math(EXPR i "${i} + 1")
      endforeach()
      if(users)
        set_property(SOURCE ${users} DIRECTORY ${source_dir} APPEND PROPERTY COMPILE_DEFINITIONS
                     "${def}")
        set(moved TRUE)
      else()
        list(APPEND keep "${def}")
      endif()
    endforeach()
    if(moved)
      set_property(TARGET ${target} PROPERTY COMPILE_DEFINITIONS "${keep}")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    crosstune_narrow_path_definitions(${sub})
  endforeach()
endfunction()
