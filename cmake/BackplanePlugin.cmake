# backplane_add_plugin(<name> KEY <DispatchKey> SOURCES <files...> [LINK <targets...>] [DIR <dir>])
#
# Builds libbackplane_<name>.so beside the core and, right after linking, its
# manifest libbackplane_<name>.manifest.yaml: backplane_manifest opens the new
# plugin in a separate process and records which registry ops it registered for
# KEY, so the manifest cannot drift from the code.
# Adds a post-build check that `target` loads libstdc++ dynamically
# (see CheckDynamicLibstdcxx.cmake).
function(backplane_check_dynamic_libstdcxx target)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:${target}> -DREADELF=${CMAKE_READELF}
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckDynamicLibstdcxx.cmake
    VERBATIM)
endfunction()

function(backplane_add_plugin name)
  cmake_parse_arguments(P "" "KEY;DIR" "SOURCES;LINK" ${ARGN})
  if(NOT P_DIR)
    set(P_DIR ${BACKPLANE_PLUGIN_DIR})
  endif()
  if(NOT P_KEY)
    message(FATAL_ERROR "backplane_add_plugin(${name}): KEY <DispatchKey> is required")
  endif()
  set(target backplane_${name})
  add_library(${target} SHARED ${P_SOURCES})
  target_link_libraries(${target} PRIVATE backplane_core ${P_LINK})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME backplane_${name}
    LIBRARY_OUTPUT_DIRECTORY ${P_DIR}
    INSTALL_RPATH "$ORIGIN")
  add_dependencies(${target} backplane_manifest)
  backplane_check_dynamic_libstdcxx(${target})
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND backplane_manifest --plugin $<TARGET_FILE:${target}> --name ${name} --key ${P_KEY}
            --version ${PROJECT_VERSION}
            --out ${P_DIR}/libbackplane_${name}.manifest.yaml
    COMMENT "Writing manifest of backend '${name}'"
    VERBATIM)
endfunction()
