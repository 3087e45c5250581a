# backplane_add_plugin(<name>
#     DISPATCH_KEY <CPU|CUDA|PrivateUse1|...>
#     SOURCES <files...>
#     [LINK <targets...>]            more libraries to link (the core is linked already)
#     [VERSION <version>]            the plugin's version (default: the project's)
#     [OUTPUT_DIR <dir>]             where the library and manifest are written
#                                    (default: BACKPLANE_PLUGIN_DIR, else <build>/lib)
#     [PYTHON_MODULE <module>]       the plugin's Python side (device module, helpers),
#                                    named in its manifest, imported by backplane.load()
#                                    after the library opens, its on_load(path) called
#     [PYTHON_SOURCES <dir>]         <dir> holds package <module>: copied beside the
#                                    plugin (python/<module>) and installed with it.
#                                    Without it the module is imported by name (a plugin
#                                    wheel that ships it as its own package)
#     [REGISTRY <file.yaml>]         the plugin's own ops: a registry fragment with its
#                                    own `namespace:` (docs/vendor-ops.md), checked at
#                                    build time, copied beside the plugin as
#                                    libbackplane_<name>.ops.yaml and named in its manifest
#     [USES_REGISTRY <file.yaml>]    another plugin's fragment, whose ops this one also
#                                    implements: read at build time (so the manifest lists
#                                    them) but not shipped; load that plugin first
#     [STABLE_ABI [TORCH_TARGET <major.minor>]]
#                                    kernels on PyTorch's stable ABI (backplane/plugin/stable_kernel.h):
#                                    built against the headers and C shim of the torch in
#                                    BACKPLANE_STABLE_TORCH_DIR (a torch package directory;
#                                    default: the one this Backplane uses) with
#                                    TORCH_TARGET_VERSION = TORCH_TARGET (default: that
#                                    torch's major.minor); the plugin then runs under that
#                                    torch and every later one (docs/shipping-a-plugin.md)
#     [PRECOMPILE_TORCH_HEADERS]     torch's headers precompiled once for the plugin's C++
#                                    files (cmake/BackplanePrecompile.cmake says when that
#                                    pays); -DBACKPLANE_PCH=OFF turns it off.
#                                    Not with STABLE_ABI (those files never see them)
#     [NO_INSTALL])
#
# Builds libbackplane_<name>.so and, right after linking, its manifest
# libbackplane_<name>.manifest.yaml: backplane_manifest opens the new plugin in a
# separate process and records which registry ops it registered for the key, so the
# manifest cannot drift from the code. Unless NO_INSTALL, `cmake --install` puts both
# (and the Python side) in BACKPLANE_INSTALL_PLUGIN_DIR (default: lib).
#
# The same function builds the plugins in this repository and out of tree, through
# find_package(Backplane): there it uses the installed core and manifest tool.

set(_BACKPLANE_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})
include(${_BACKPLANE_CMAKE_DIR}/BackplanePrecompile.cmake)

# Adds a post-build check that `target` loads libstdc++ dynamically
# (see CheckDynamicLibstdcxx.cmake).
function(backplane_check_dynamic_libstdcxx target)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:${target}> -DREADELF=${CMAKE_READELF}
            -P ${_BACKPLANE_CMAKE_DIR}/CheckDynamicLibstdcxx.cmake
    VERBATIM)
endfunction()

# In this repository the core and the manifest tool are build targets; installed,
# BackplaneConfig.cmake names the imported ones.
if(NOT BACKPLANE_CORE_TARGET)
  set(BACKPLANE_CORE_TARGET backplane_core)
  set(BACKPLANE_MANIFEST_TARGET backplane_manifest)
  set(BACKPLANE_HEADERS_DIR ${_BACKPLANE_CMAKE_DIR}/../core/include)  # installed: BackplaneConfig sets it
endif()

# A stable-ABI plugin: the core's headers, the target torch's headers and C shim
# (libtorch_cpu; libtorch_cuda too for CUDA), nothing of libtorch's C++ API
# (TORCH_STABLE_ONLY makes its headers refuse to compile). Sets out_args to the
# manifest tool's flags.
function(_backplane_stable_abi target torch_target key out_args)
  if(BACKPLANE_STABLE_TORCH_DIR)
    set(torch_dir ${BACKPLANE_STABLE_TORCH_DIR})
  else()
    get_target_property(torch_includes backplane::torch INTERFACE_INCLUDE_DIRECTORIES)
    list(GET torch_includes 0 first_include)
    get_filename_component(torch_dir ${first_include} DIRECTORY)  # <torch>/include -> <torch>
  endif()
  if(NOT EXISTS ${torch_dir}/include/torch/csrc/stable/library.h)
    message(FATAL_ERROR "backplane_add_plugin(${target}): STABLE_ABI: ${torch_dir} has no include/torch/csrc/stable "
                        "(set BACKPLANE_STABLE_TORCH_DIR to the torch package directory of the oldest torch to target)")
  endif()
  file(STRINGS ${torch_dir}/include/torch/headeronly/version.h version_lines REGEX "define TORCH_VERSION_M(AJ|IN)OR ")
  string(REGEX REPLACE ".*TORCH_VERSION_MAJOR ([0-9]+).*" "\\1" headers_major "${version_lines}")
  string(REGEX REPLACE ".*TORCH_VERSION_MINOR ([0-9]+).*" "\\1" headers_minor "${version_lines}")
  if(NOT torch_target)
    set(torch_target ${headers_major}.${headers_minor})
  endif()
  if(NOT torch_target MATCHES "^([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "backplane_add_plugin(${target}): TORCH_TARGET ${torch_target}: expected major.minor such as 2.13")
  endif()
  math(EXPR target_version "(${CMAKE_MATCH_1} << 56) | (${CMAKE_MATCH_2} << 48)" OUTPUT_FORMAT HEXADECIMAL)
  target_compile_definitions(${target} PRIVATE TORCH_TARGET_VERSION=${target_version}ULL TORCH_STABLE_ONLY)
  # Backplane's headers alone: the core target's include directories bring this
  # Backplane's torch with them, whose headers would win over the target torch's.
  target_include_directories(${target} PRIVATE ${BACKPLANE_HEADERS_DIR})
  target_include_directories(${target} SYSTEM PRIVATE ${torch_dir}/include)
  target_compile_features(${target} PRIVATE cxx_std_17)
  set(shims ${torch_dir}/lib/libtorch_cpu.so)
  if(key STREQUAL "CUDA")
    list(APPEND shims ${torch_dir}/lib/libtorch_cuda.so)
  endif()
  target_link_libraries(${target} PRIVATE ${shims})
  set(${out_args} --torch-target ${torch_target} PARENT_SCOPE)
endfunction()

function(backplane_add_plugin name)
  cmake_parse_arguments(P "NO_INSTALL;STABLE_ABI;PRECOMPILE_TORCH_HEADERS"
                        "DISPATCH_KEY;VERSION;OUTPUT_DIR;PYTHON_MODULE;PYTHON_SOURCES;REGISTRY;USES_REGISTRY;TORCH_TARGET"
                        "SOURCES;LINK" ${ARGN})
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "backplane_add_plugin(${name}): unexpected arguments: ${P_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$" OR name STREQUAL "core")
    message(FATAL_ERROR "backplane_add_plugin(${name}): the name must be a plain identifier other than 'core'")
  endif()
  if(NOT P_DISPATCH_KEY)
    message(FATAL_ERROR "backplane_add_plugin(${name}): DISPATCH_KEY <key> is required (CPU, CUDA, PrivateUse1, ...)")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "backplane_add_plugin(${name}): SOURCES is empty")
  endif()
  if(P_PRECOMPILE_TORCH_HEADERS AND P_STABLE_ABI)
    message(FATAL_ERROR "backplane_add_plugin(${name}): PRECOMPILE_TORCH_HEADERS precompiles the full torch "
                        "headers, which a STABLE_ABI plugin must not include: leave one out")
  endif()
  if(P_PYTHON_SOURCES AND NOT P_PYTHON_MODULE)
    message(FATAL_ERROR "backplane_add_plugin(${name}): PYTHON_SOURCES needs PYTHON_MODULE <package name>")
  endif()
  if(NOT P_OUTPUT_DIR)
    if(BACKPLANE_PLUGIN_DIR)
      set(P_OUTPUT_DIR ${BACKPLANE_PLUGIN_DIR})
    else()
      set(P_OUTPUT_DIR ${CMAKE_BINARY_DIR}/lib)
    endif()
  endif()
  if(NOT P_VERSION)
    set(P_VERSION "${PROJECT_VERSION}")
    if(NOT P_VERSION)
      set(P_VERSION "0.0.0")
    endif()
  endif()

  set(target backplane_${name})
  add_library(${target} SHARED ${P_SOURCES})
  set(stable_args "")
  if(P_STABLE_ABI)
    _backplane_stable_abi(${target} "${P_TORCH_TARGET}" "${P_DISPATCH_KEY}" stable_args)
    target_link_libraries(${target} PRIVATE ${P_LINK})
  else()
    if(P_TORCH_TARGET)
      message(FATAL_ERROR "backplane_add_plugin(${name}): TORCH_TARGET needs STABLE_ABI (a full-ABI plugin runs "
                          "under the torch it was built with only)")
    endif()
    target_link_libraries(${target} PRIVATE ${BACKPLANE_CORE_TARGET} ${P_LINK})
    if(P_PRECOMPILE_TORCH_HEADERS)
      backplane_precompile_torch(${target})
    endif()
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME backplane_${name}
    LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN")
  # The manifest tool runs right after the link (below). Built here, under Ninja, the
  # link waits for it and the compiles do not: its path is named as a file, since a
  # target named in the command (even through $<TARGET_FILE>) makes every object of the
  # plugin wait for the tool and so for the core's link (the CUDA kernels, the longest
  # compiles, would start late). Make cannot follow a file made by another target's
  # rules: there the whole target waits.
  set(manifest_tool $<TARGET_FILE:${BACKPLANE_MANIFEST_TARGET}>)
  if(TARGET ${BACKPLANE_MANIFEST_TARGET} AND NOT BACKPLANE_MANIFEST_TARGET MATCHES "::")
    get_target_property(tool_dir ${BACKPLANE_MANIFEST_TARGET} RUNTIME_OUTPUT_DIRECTORY)
    if(CMAKE_GENERATOR MATCHES "Ninja" AND tool_dir)
      set(manifest_tool ${tool_dir}/${BACKPLANE_MANIFEST_TARGET}${CMAKE_EXECUTABLE_SUFFIX})
      set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${manifest_tool})
    else()
      add_dependencies(${target} ${BACKPLANE_MANIFEST_TARGET})
    endif()
  endif()
  backplane_check_dynamic_libstdcxx(${target})

  set(manifest ${P_OUTPUT_DIR}/libbackplane_${name}.manifest.yaml)
  set(python_args "")
  if(P_PYTHON_MODULE)
    set(python_args --python-module ${P_PYTHON_MODULE})
  endif()
  if(P_PYTHON_SOURCES)
    # The Python side sits beside the plugin, in python/<module>: found through the
    # manifest wherever the pair is copied or installed.
    # Copied whenever one of its files changes (a copy made after each link missed an
    # edit of the Python alone).
    list(APPEND python_args --python-path python)
    file(GLOB_RECURSE python_files CONFIGURE_DEPENDS ${P_PYTHON_SOURCES}/${P_PYTHON_MODULE}/*.py)
    set(python_stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}_python.stamp)
    add_custom_command(OUTPUT ${python_stamp}
      COMMAND ${CMAKE_COMMAND} -E copy_directory ${P_PYTHON_SOURCES}/${P_PYTHON_MODULE}
              ${P_OUTPUT_DIR}/python/${P_PYTHON_MODULE}
      COMMAND ${CMAKE_COMMAND} -E touch ${python_stamp}
      DEPENDS ${python_files}
      COMMENT "Copying the Python module of backend '${name}'"
      VERBATIM)
    add_custom_target(${target}_python ALL DEPENDS ${python_stamp})
    add_dependencies(${target} ${target}_python)
  endif()
  set(registry_args "")
  set(fragment_copy "")
  if(P_REGISTRY)
    get_filename_component(fragment ${P_REGISTRY} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    if(NOT EXISTS ${fragment})
      message(FATAL_ERROR "backplane_add_plugin(${name}): REGISTRY ${P_REGISTRY}: no such file (${fragment})")
    endif()
    set(fragment_copy ${P_OUTPUT_DIR}/libbackplane_${name}.ops.yaml)
    set(registry_args --registry ${fragment} --registry-name libbackplane_${name}.ops.yaml)
    # An edit of the fragment relinks the plugin, which rewrites the copy and the manifest.
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${fragment})
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND ${CMAKE_COMMAND} -E copy ${fragment} ${fragment_copy}
      VERBATIM)
  endif()
  if(P_USES_REGISTRY)
    if(P_REGISTRY)
      message(FATAL_ERROR "backplane_add_plugin(${name}): REGISTRY and USES_REGISTRY exclude each other")
    endif()
    get_filename_component(used ${P_USES_REGISTRY} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    set(registry_args --registry ${used})  # no --registry-name: the manifest names no fragment
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${used})
  endif()
  # The manifest records the build type, so `backplane bench` can say when it times an
  # unoptimised plugin; "none" where no CMAKE_BUILD_TYPE was given (no optimisation flags).
  set(build_type $<IF:$<BOOL:$<CONFIG>>,$<CONFIG>,none>)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${manifest_tool} --plugin $<TARGET_FILE:${target}> --name ${name}
            --key ${P_DISPATCH_KEY} --version ${P_VERSION} ${python_args} ${registry_args} ${stable_args}
            --build-type ${build_type} --out ${manifest}
    COMMENT "Writing manifest of backend '${name}'"
    VERBATIM)

  if(NOT P_NO_INSTALL)
    if(NOT BACKPLANE_INSTALL_PLUGIN_DIR)
      set(BACKPLANE_INSTALL_PLUGIN_DIR lib)
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${BACKPLANE_INSTALL_PLUGIN_DIR})
    install(FILES ${manifest} ${fragment_copy} DESTINATION ${BACKPLANE_INSTALL_PLUGIN_DIR})
    if(P_PYTHON_SOURCES)
      install(DIRECTORY ${P_PYTHON_SOURCES}/${P_PYTHON_MODULE} DESTINATION ${BACKPLANE_INSTALL_PLUGIN_DIR}/python
              PATTERN __pycache__ EXCLUDE)
    endif()
  endif()
endfunction()
