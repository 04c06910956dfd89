# zerojit_embed(<target> NAMESPACE <c++ namespace> FUNCTION <name> ROOT <dir> FILES <files...>)
#
# Embeds source files (kernels and the headers they include) into a static library as string
# literals, so NVRTC compiles them from memory and the binaries carry their kernels with them.
# Each file is stored under its path relative to ROOT, which is also the name an #include
# directive uses. The generated translation unit defines
#   const zerojit::EmbeddedFileSet& <namespace>::<function>();
#
# The same file serves zerojit's own build, a project that includes zerojit with
# add_subdirectory or FetchContent, and an installed package (zerojitConfig.cmake includes it
# from beside itself): the generator script is found next to this file, and the library links
# zerojit::embedded_interface, which every one of them defines.
include_guard(GLOBAL)

function(zerojit_embed target)
  cmake_parse_arguments(ARG "" "NAMESPACE;FUNCTION;ROOT" "FILES" ${ARGN})
  foreach(required IN ITEMS NAMESPACE FUNCTION ROOT FILES)
    if(NOT ARG_${required})
      message(FATAL_ERROR "zerojit_embed(${target}): ${required} is required")
    endif()
  endforeach()
  # Where this function was defined, not where it is called from.
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/zerojit_embed_generate.cmake)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${target}_embedded.cpp)
  set(relative_files "")
  foreach(file IN LISTS ARG_FILES)
    file(RELATIVE_PATH relative ${ARG_ROOT} ${file})
    list(APPEND relative_files ${relative})
  endforeach()
  string(REPLACE ";" "|" joined "${relative_files}")
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DROOT=${ARG_ROOT} "-DFILES=${joined}" -DOUTPUT=${output}
            -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION} -P ${script}
    DEPENDS ${ARG_FILES} ${script}
    COMMENT "Embedding ${target} kernel sources"
    VERBATIM)
  add_library(${target} STATIC ${output})
  # Position-independent like zerojit itself, so the library also goes into a shared object.
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${target} PUBLIC zerojit::embedded_interface)
endfunction()
