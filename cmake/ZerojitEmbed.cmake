# zerojit_embed(<target> NAMESPACE <c++ namespace> FUNCTION <name> ROOT <dir> FILES <files...>)
#
# Embeds source files (kernels and the headers they include) into a static library as string
# literals, so NVRTC compiles them from memory and the binaries carry their kernels with them.
# Each file is stored under its path relative to ROOT, which is also the name an #include
# directive uses. The generated translation unit defines
#   const zerojit::EmbeddedFileSet& <namespace>::<function>();
set(ZEROJIT_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/zerojit_embed_generate.cmake)

function(zerojit_embed target)
  cmake_parse_arguments(ARG "" "NAMESPACE;FUNCTION;ROOT" "FILES" ${ARGN})
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
            -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION} -P ${ZEROJIT_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${ZEROJIT_EMBED_SCRIPT}
    COMMENT "Embedding ${target} kernel sources"
    VERBATIM)
  add_library(${target} STATIC ${output})
  target_link_libraries(${target} PUBLIC zerojit_embedded_interface)
endfunction()
