# Installs zerojit as a CMake package (find_package(zerojit CONFIG)) and a pkg-config file:
#   lib/cmake/zerojit/   zerojitConfig.cmake, its version file, the exported targets
#                        (zerojit::zerojit, and where built zerojit::dsv4, zerojit::cli,
#                        zerojit::tool) and zerojit_embed() with its generator script
#   include/zerojit/     the core's headers (and tool.hpp with the tool library), testing.hpp
#                        (device buffers and comparisons for a project's GPU checks), and
#                        device/ (the headers a kernel includes: types.cuh, numerics.cuh, ...)
#   include/zerojit/kernels/dsv4/   the DSv4 family's headers, included as "dsv4/..."
#   lib/pkgconfig/zerojit.pc        the core, for builds without CMake
# Included from the top-level CMakeLists.txt when ZEROJIT_INSTALL is on.
include(CMakePackageConfigHelpers)

set(ZEROJIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zerojit)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/zerojit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(zerojit_installed_targets zerojit zerojit_embedded_interface)
set(ZEROJIT_PACKAGE_COMPONENTS core)

if(ZEROJIT_BUILD_DSV4)
  # The headers a host program includes (owners, argument blocks, configuration); the device
  # sources are embedded in zerojit_dsv4_sources and not needed.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/dsv4
          DESTINATION ${ZEROJIT_KERNELS_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
          PATTERN "battery" EXCLUDE)
  list(APPEND zerojit_installed_targets zerojit_dsv4 zerojit_dsv4_config zerojit_dsv4_sources)
  list(APPEND ZEROJIT_PACKAGE_COMPONENTS dsv4)
endif()
if(ZEROJIT_BUILD_CLI)
  install(FILES ${PROJECT_SOURCE_DIR}/tools/include/zerojit/tool.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerojit)
  list(APPEND zerojit_installed_targets zerojit_cli)
  list(APPEND ZEROJIT_PACKAGE_COMPONENTS cli)
endif()
if(ZEROJIT_BUILD_TOOL)
  set_target_properties(zerojit_tool PROPERTIES EXPORT_NAME tool)
  list(APPEND zerojit_installed_targets zerojit_tool)
  list(APPEND ZEROJIT_PACKAGE_COMPONENTS tool)
endif()

install(TARGETS ${zerojit_installed_targets} EXPORT zerojitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT zerojitTargets NAMESPACE zerojit:: DESTINATION ${ZEROJIT_INSTALL_CMAKEDIR})

set(ZEROJIT_INSTALL_DEVICE_DIR ${CMAKE_INSTALL_INCLUDEDIR}/zerojit/device)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zerojitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zerojitConfig.cmake
                              INSTALL_DESTINATION ${ZEROJIT_INSTALL_CMAKEDIR}
                              PATH_VARS ZEROJIT_INSTALL_DEVICE_DIR)
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zerojitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zerojitConfig.cmake
              ${PROJECT_BINARY_DIR}/zerojitConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/ZerojitEmbed.cmake
              ${PROJECT_SOURCE_DIR}/cmake/zerojit_embed_generate.cmake
        DESTINATION ${ZEROJIT_INSTALL_CMAKEDIR})

# pkg-config: the core only (the families and the tool library are for CMake builds).
if(ZEROJIT_SHARED)
  set(ZEROJIT_PC_LIBS_PRIVATE "")
  set(ZEROJIT_PC_LIBS "-L\${libdir} -lzerojit -pthread -l${CMAKE_DL_LIBS}")
else()
  set(ZEROJIT_PC_LIBS "-L\${libdir} -lzerojit")
  set(ZEROJIT_PC_LIBS_PRIVATE "-pthread -l${CMAKE_DL_LIBS}")
endif()
# The prefix is found from where the file lies (${pcfiledir}), not fixed at configure time, so
# that `cmake --install --prefix X` (or DESTDIR, or moving the tree) leaves a file that points at
# X. An absolute libdir or includedir stays absolute.
set(ZEROJIT_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${ZEROJIT_PC_DIR}")
  set(ZEROJIT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH zerojit_pc_up /${ZEROJIT_PC_DIR} /)
  string(REGEX REPLACE "/$" "" zerojit_pc_up "${zerojit_pc_up}")
  set(ZEROJIT_PC_PREFIX "\${pcfiledir}/${zerojit_pc_up}")
endif()
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(ZEROJIT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(ZEROJIT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/zerojit.pc.in ${PROJECT_BINARY_DIR}/zerojit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/zerojit.pc DESTINATION ${ZEROJIT_PC_DIR})
