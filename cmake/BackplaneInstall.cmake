# `cmake --install BUILD --prefix P` (and the wheel, whose prefix is the backplane Python
# package): headers, libbackplane_core, the `backplane` command and its templates, the
# build tools, the plugins with their manifests (backplane_add_plugin), the bench engine
# where it is built (bench/CMakeLists.txt), and a relocatable BackplaneConfig.cmake
# exporting Backplane::core, Backplane::manifest and backplane_add_plugin().
include(CMakePackageConfigHelpers)

# In a wheel, the modules of the entry points (torch.backends autoload, the console
# script) sit beside the package: they must work where importing it fails.
if(SKBUILD)
  install(FILES python/backplane_autoload.py python/backplane_plugins.py python/backplane_wheel.py
          DESTINATION ${SKBUILD_PLATLIB_DIR})
else()
  # A prefix install carries the Python side too, in P/lib/python: `PYTHONPATH=P/lib/python`
  # imports the backplane package (which finds libbackplane_core.so in P/lib, its parent's
  # parent: _native.py), and a plugin wheel built with --no-build-isolation finds its
  # metadata provider backplane_wheel there. The dist-info makes Backplane's version
  # readable by importlib.metadata, as a full-ABI plugin wheel's requirement needs
  # (backplane_wheel.requirements); it declares no entry points: torch's autoload and the
  # console script are the wheel's.
  install(DIRECTORY python/backplane DESTINATION lib/python
          PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
  install(FILES python/backplane_autoload.py python/backplane_plugins.py python/backplane_wheel.py
          DESTINATION lib/python)
  file(WRITE ${PROJECT_BINARY_DIR}/python-dist-info/METADATA
       "Metadata-Version: 2.1\nName: backplane\nVersion: ${PROJECT_VERSION}\n")
  install(FILES ${PROJECT_BINARY_DIR}/python-dist-info/METADATA
          DESTINATION lib/python/backplane-${PROJECT_VERSION}.dist-info)
endif()

set(_bp_cmake_dest lib/cmake/Backplane)
install(TARGETS backplane_core EXPORT BackplaneTargets LIBRARY DESTINATION lib)
install(TARGETS backplane backplane_manifest backplane_registry_check EXPORT BackplaneTargets RUNTIME DESTINATION bin)
# The host API (backplane/*.h) and the plugin SDK (backplane/plugin/*.h); the core's internals
# stay in core/src (reached in tree through backplane_core_internal), so they are never installed.
install(DIRECTORY core/include/backplane DESTINATION include)
# `backplane new-backend` writes its project from these templates (cli/templates), and for
# --dispatch-key PrivateUse1 copies the npu files backends/npu/new-backend-files.txt lists,
# renamed: exactly those files and the list are installed.
install(DIRECTORY cli/templates/new-backend/ DESTINATION share/backplane/templates/new-backend)
# Every file of the list: its '#' comments and [PART] headers aside (all parts are installed).
file(STRINGS backends/npu/new-backend-files.txt _bp_device_template REGEX "^[^#[]")
foreach(_bp_file IN LISTS _bp_device_template)
  get_filename_component(_bp_dir ${_bp_file} DIRECTORY)
  install(FILES backends/npu/${_bp_file} DESTINATION share/backplane/templates/PrivateUse1/${_bp_dir})
endforeach()
install(FILES backends/npu/new-backend-files.txt DESTINATION share/backplane/templates/PrivateUse1)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS backends/npu/new-backend-files.txt)
install(FILES ${PROJECT_BINARY_DIR}/lib/backplane_build.json DESTINATION lib)
install(EXPORT BackplaneTargets NAMESPACE Backplane:: DESTINATION ${_bp_cmake_dest})
# The exported targets name the build tool by the name CMake files use.
set_target_properties(backplane_manifest PROPERTIES EXPORT_NAME manifest)
set_target_properties(backplane_core PROPERTIES EXPORT_NAME core)
set_target_properties(backplane_registry_check PROPERTIES EXPORT_NAME registry_check)
set_target_properties(backplane PROPERTIES EXPORT_NAME cli)

if(IS_ABSOLUTE "${BACKPLANE_PYTHON}")
  set(BACKPLANE_PYTHON_ABSOLUTE "${BACKPLANE_PYTHON}")
else()
  find_program(BACKPLANE_PYTHON_ABSOLUTE "${BACKPLANE_PYTHON}")
endif()
configure_package_config_file(cmake/BackplaneConfig.cmake.in ${PROJECT_BINARY_DIR}/BackplaneConfig.cmake
                              INSTALL_DESTINATION ${_bp_cmake_dest})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/BackplaneConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/BackplaneConfig.cmake ${PROJECT_BINARY_DIR}/BackplaneConfigVersion.cmake
              cmake/TorchFromPython.cmake cmake/BackplanePlugin.cmake cmake/BackplanePrecompile.cmake
              cmake/CheckDynamicLibstdcxx.cmake
        DESTINATION ${_bp_cmake_dest})
