# Definitions that hold a path of this checkout or build tree (CT_SERVER_BIN="/.../crosstune-server",
# CT_SCRIPTS_DIR="/.../scripts") are kept out of the compile flags.
#
# Why: ccache serves an object only to a compile with the same command line, and such a path
# differs between two clones (CI clones afresh into its own folder; CCACHE_BASEDIR makes include
# paths relative, never the text of a -D). Given to a whole target, one path made every file of
# that target miss the cache in another clone: 84 of the main tree's 288 files; given only to the
# files that name it, 55 of its 136 unity compiles in a full run still did, among them the test
# files that start programs, the slow ones to compile.
#
# crosstune_move_path_definitions(DIR) walks DIR's targets and those of its subdirectories, after
# they are all defined (the top-level CMakeLists.txt calls it last):
# - in an executable, each such definition NAME="PATH" becomes NAME=CROSSTUNE_BUILD_PATH(NAME)
#   (cmake/include/crosstune_build_path.h, forced into the target's files: a const char* to the
#   same text) and PATH goes into a source generated for the target, the one file that differs
#   between clones. The definition stays defined (#ifdef still works); a file that joined it to
#   a string literal ("run " CT_CLI) fails to compile and says where. The files that name it
#   compile outside the unity batches, as they did while it was theirs alone.
# - in a library (one executable may link several, each with paths of its own), the definition
#   goes only to the files that name it, so the others hit the cache (in the main tree two small
#   files keep one: kernel_include_dir.cc and the test helpers' qemu_board.cc). It stays on the target
#   when a header beside the sources (or a test helper's) names it: a header may use it under
#   #ifdef, where leaving it out would change what compiles rather than fail.
# Only a quoted value is moved; a system path (/usr/bin/clang-14) is the same in every clone
# and stays where it is.
function(crosstune_move_path_definitions dir)
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
    get_target_property(binary_dir ${target} BINARY_DIR)
    set(keep)
    set(changed FALSE)
    set(texts_read FALSE)
    set(table "")
    foreach(def IN LISTS defs)
      if(NOT def MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
        list(APPEND keep "${def}")
        continue()
      endif()
      set(name ${CMAKE_MATCH_1})
      set(value "${CMAKE_MATCH_2}")
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
      set(in_header FALSE)
      if(header_text MATCHES "${word}")
        set(in_header TRUE)
      endif()
      set(users)
      set(i 0)
      foreach(path IN LISTS paths)
        if(source_text_${i} MATCHES "${word}")
          list(APPEND users "${path}")
        endif()
        math(EXPR i "${i} + 1")
      endforeach()
      if(type STREQUAL "EXECUTABLE" AND value MATCHES "^\"[^\"\\\\]*\"$")
        # The value is already a C string literal: the generated source takes it as it is.
        string(APPEND table "    {\"${name}\", ${value}},\n")
        list(APPEND keep "${name}=CROSSTUNE_BUILD_PATH(${name})")
        set(changed TRUE)
        # The files that name it compile alone, as they did while it was theirs alone (a file
        # with definitions of its own leaves the unity batch): joined to a batch, their helpers
        # of one name in anonymous namespaces would clash.
        if(users AND NOT in_header)
          set_property(SOURCE ${users} DIRECTORY ${source_dir} PROPERTY
                       SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
        continue()
      endif()
      if(in_header)
        list(APPEND keep "${def}")
        continue()
      endif()
      if(users)
        set_property(SOURCE ${users} DIRECTORY ${source_dir} APPEND PROPERTY COMPILE_DEFINITIONS
                     "${def}")
        set(changed TRUE)
      else()
        list(APPEND keep "${def}")
      endif()
    endforeach()
    if(table)
      set(generated "${binary_dir}/${target}-build-paths.cc")
      file(GENERATE OUTPUT "${generated}" CONTENT
"// Generated by cmake/CrosstunePathDefinitions.cmake: the paths ${target} was given.
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern \"C\" const char* crosstune_build_path(const char* name) {
  static const struct {
    const char* name;
    const char* path;
  } kPaths[] = {
${table}  };
  for (const auto& p : kPaths) {
    if (std::strcmp(p.name, name) == 0) return p.path;
  }
  std::fprintf(stderr, \"crosstune_build_path: ${target} was given no path named %s\\n\", name);
  std::abort();
}
")
      target_sources(${target} PRIVATE "${generated}")
      # Compiled alone: in a unity batch it would make the batch differ between clones.
      set_source_files_properties("${generated}" TARGET_DIRECTORY ${target} PROPERTIES
                                  GENERATED ON SKIP_UNITY_BUILD_INCLUSION ON)
      target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/cmake/include")
      target_compile_options(${target} PRIVATE "SHELL:-include crosstune_build_path.h")
    endif()
    if(changed)
      set_property(TARGET ${target} PROPERTY COMPILE_DEFINITIONS "${keep}")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    crosstune_move_path_definitions(${sub})
  endforeach()
endfunction()
