# zerojit_embed(<target> NAMESPACE <c++ namespace> FUNCTION <name> ROOT <dir> FILES <files...>
#               [DEVICE_HEADERS])
#
# Embeds source files (kernels and the headers they include) into a static library as string
# literals, so NVRTC compiles them from memory and the binaries carry their kernels with them.
# Each file is stored under its path relative to ROOT, which is also the name an #include
# directive uses. The generated translation unit defines
#   const zerojit::EmbeddedFileSet& <namespace>::<function>();
#
# DEVICE_HEADERS also embeds zerojit's device headers (include/zerojit/device/: types.cuh with
# the types a key's dtype renders as, numerics.cuh, async_copy.cuh), under the names a kernel
# includes them by: "zerojit/device/types.cuh", ... (docs/CONSUMING.md, "Device code").
#
# The same file serves zerojit's own build, a project that includes zerojit with
# add_subdirectory or FetchContent, and an installed package (zerojitConfig.cmake includes it
# from beside itself): the generator script is found next to this file, the device headers
# where the global property ZEROJIT_DEVICE_HEADER_DIR says (set by zerojit's CMakeLists.txt and
# by zerojitConfig.cmake), and the library links zerojit::embedded_interface, which every one
# of them defines.
include_guard(GLOBAL)

function(zerojit_embed target)
  cmake_parse_arguments(ARG "DEVICE_HEADERS" "NAMESPACE;FUNCTION;ROOT" "FILES" ${ARGN})
  foreach(required IN ITEMS NAMESPACE FUNCTION ROOT FILES)
    if(NOT ARG_${required})
      message(FATAL_ERROR "zerojit_embed(${target}): ${required} is required")
    endif()
  endforeach()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "zerojit_embed(${target}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  # Where this function was defined, not where it is called from.
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/zerojit_embed_generate.cmake)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${target}_embedded.cpp)
  # Each file as "<name its #include uses>=<absolute path>".
  set(entries "")
  set(sources ${ARG_FILES})
  foreach(file IN LISTS ARG_FILES)
    file(RELATIVE_PATH relative ${ARG_ROOT} ${file})
    list(APPEND entries "${relative}=${file}")
  endforeach()
  if(ARG_DEVICE_HEADERS)
    get_property(device_dir GLOBAL PROPERTY ZEROJIT_DEVICE_HEADER_DIR)
    if(NOT device_dir OR NOT IS_DIRECTORY "${device_dir}")
      message(FATAL_ERROR "zerojit_embed(${target}): DEVICE_HEADERS, but zerojit's device headers "
                          "are not found (\"${device_dir}\"); find_package(zerojit) or "
                          "add_subdirectory(zerojit) first")
    endif()
    file(GLOB device_headers ${device_dir}/*.cuh)
    foreach(file IN LISTS device_headers)
      get_filename_component(name ${file} NAME)
      list(APPEND entries "zerojit/device/${name}=${file}")
      list(APPEND sources ${file})
    endforeach()
  endif()
  string(REPLACE ";" "|" joined "${entries}")
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} "-DENTRIES=${joined}" -DOUTPUT=${output}
            -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION} -P ${script}
    DEPENDS ${sources} ${script}
    COMMENT "Embedding ${target} kernel sources"
    VERBATIM)
  add_library(${target} STATIC ${output})
  # Position-independent like zerojit itself, so the library also goes into a shared object.
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${target} PUBLIC zerojit::embedded_interface)
endfunction()
