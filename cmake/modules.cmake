# The module graph (shared/design/architecture.md "Modules (folders) and what may include what"):
# each folder is one library, walrelay_<folder>, and declares here the modules it may use. The
# declaration links them and checks, at configure time (so in every build and in CI), that no
# source of the folder includes a header of a module it did not declare: a forbidden include fails
# the configure step with the file and the include, before anything compiles.
#
#   walrelay_module_uses(<folder> [PUBLIC <module>...] [PRIVATE <module>...])
#
# <module> is a folder name (core, config, ...): its library walrelay_<module> is linked, and
# `#include "walrelay/<module>/..."` becomes allowed in <folder>'s sources. Third-party libraries
# are linked as usual with target_link_libraries.
function(walrelay_module_uses folder)
  cmake_parse_arguments(M "" "" "PUBLIC;PRIVATE" ${ARGN})
  if(M_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "walrelay_module_uses(${folder}): unknown arguments ${M_UNPARSED_ARGUMENTS}")
  endif()
  set(allowed ${folder} ${M_PUBLIC} ${M_PRIVATE})
  foreach(m ${M_PUBLIC})
    target_link_libraries(walrelay_${folder} PUBLIC walrelay_${m})
  endforeach()
  foreach(m ${M_PRIVATE})
    target_link_libraries(walrelay_${folder} PRIVATE walrelay_${m})
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/${folder}/*.cpp ${PROJECT_SOURCE_DIR}/${folder}/*.hpp)
  foreach(f ${sources})
    file(STRINGS ${f} includes REGEX "^#include \"walrelay/[a-z_]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include \"walrelay/([a-z_]+)/.*" "\\1" used "${line}")
      if(NOT used IN_LIST allowed)
        file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${f})
        message(FATAL_ERROR "${rel}: ${line}\n  ${folder}/ may use only: ${allowed}. Declare the "
                            "dependency in ${folder}/CMakeLists.txt (walrelay_module_uses) if "
                            "the module graph allows it (shared/design/architecture.md).")
      endif()
    endforeach()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY WALRELAY_MODULES "${folder}: ${M_PUBLIC} ${M_PRIVATE}")
endfunction()
