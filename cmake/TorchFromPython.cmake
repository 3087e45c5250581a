# Finds libtorch through a Python environment's torch package and makes two targets:
#   backplane::torch       c10 + torch_cpu + torch, headers, the wheel's C++ ABI flag
#   backplane::torch_cuda  c10_cuda + torch_cuda (only when the wheel is a CUDA build)
#
# Why not find_package(Torch)? Its Caffe2Config refuses to configure a CUDA build of
# the wheel without a CUDA toolkit, even for the CPU-only parts, and adds its own
# architecture flags to every CUDA target. The paths come from the same place it uses
# (torch.utils.cmake_prefix_path); only the target set-up is ours.
#
# Input: BACKPLANE_PYTHON (default: python3 on PATH). Output variables:
#   BACKPLANE_TORCH_VERSION (e.g. 2.14.1), BACKPLANE_TORCH_MAJOR_MINOR (2.14),
#   BACKPLANE_TORCH_CUDA (CUDA version of the wheel, or empty), BACKPLANE_TORCH_LIB_DIR.

# A wheel build (scikit-build-core) builds against the Python running pip.
if(SKBUILD AND Python_EXECUTABLE)
  set(BACKPLANE_PYTHON "${Python_EXECUTABLE}" CACHE STRING "Python interpreter whose torch Backplane builds against")
endif()
set(BACKPLANE_PYTHON "python3" CACHE STRING "Python interpreter whose torch Backplane builds against")

execute_process(
  COMMAND "${BACKPLANE_PYTHON}" -c [=[
import os, torch
# cmake_prefix_path is <torch>/share/cmake; headers and libraries sit beside it.
root = os.path.dirname(os.path.dirname(torch.utils.cmake_prefix_path))
print(torch.__version__.split('+')[0])
print(torch.utils.cmake_prefix_path)
print(os.path.join(root, 'include'))
print(os.path.join(root, 'include', 'torch', 'csrc', 'api', 'include'))
print(os.path.join(root, 'lib'))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.version.cuda or '')
]=]
  OUTPUT_VARIABLE _bp_torch_info
  ERROR_VARIABLE _bp_torch_err
  RESULT_VARIABLE _bp_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _bp_torch_rc EQUAL 0)
  message(FATAL_ERROR "Backplane: could not import torch with BACKPLANE_PYTHON='${BACKPLANE_PYTHON}'.\n"
                      "Run `make setup` (or pass -DBACKPLANE_PYTHON=/path/to/python with torch >= 2.11).\n${_bp_torch_err}")
endif()
string(REPLACE "\n" ";" _bp_torch_info "${_bp_torch_info}")
list(GET _bp_torch_info 0 BACKPLANE_TORCH_VERSION)
list(GET _bp_torch_info 2 _bp_inc)
list(GET _bp_torch_info 3 _bp_api_inc)
list(GET _bp_torch_info 4 BACKPLANE_TORCH_LIB_DIR)
list(GET _bp_torch_info 5 BACKPLANE_CXX11_ABI)
list(LENGTH _bp_torch_info _bp_n)
set(BACKPLANE_TORCH_CUDA "")
if(_bp_n GREATER 6)
  list(GET _bp_torch_info 6 BACKPLANE_TORCH_CUDA)
endif()

string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _bp_mm "${BACKPLANE_TORCH_VERSION}")
set(BACKPLANE_TORCH_MAJOR_MINOR "${_bp_mm}")
if(BACKPLANE_TORCH_MAJOR_MINOR VERSION_LESS 2.11 OR BACKPLANE_TORCH_MAJOR_MINOR VERSION_GREATER 2.14)
  message(WARNING "Backplane is tested with torch 2.11 to 2.14; found ${BACKPLANE_TORCH_VERSION}.")
endif()
message(STATUS "Backplane: torch ${BACKPLANE_TORCH_VERSION} (CUDA '${BACKPLANE_TORCH_CUDA}') from ${BACKPLANE_TORCH_LIB_DIR}")

function(_bp_torch_lib target name)
  find_library(_bp_lib_${name} NAMES ${name} PATHS "${BACKPLANE_TORCH_LIB_DIR}" NO_DEFAULT_PATH REQUIRED)
  add_library(${target} SHARED IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${_bp_lib_${name}}")
endfunction()

_bp_torch_lib(backplane::c10 c10)
_bp_torch_lib(backplane::torch_cpu_lib torch_cpu)
_bp_torch_lib(backplane::torch_lib torch)
add_library(backplane::torch INTERFACE IMPORTED GLOBAL)
target_include_directories(backplane::torch SYSTEM INTERFACE "${_bp_inc}" "${_bp_api_inc}")
target_compile_definitions(backplane::torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${BACKPLANE_CXX11_ABI})
target_link_libraries(backplane::torch INTERFACE backplane::torch_lib backplane::torch_cpu_lib backplane::c10)

if(BACKPLANE_TORCH_CUDA)
  _bp_torch_lib(backplane::c10_cuda c10_cuda)
  _bp_torch_lib(backplane::torch_cuda_lib torch_cuda)
  add_library(backplane::torch_cuda INTERFACE IMPORTED GLOBAL)
  target_link_libraries(backplane::torch_cuda INTERFACE backplane::torch backplane::torch_cuda_lib backplane::c10_cuda)
endif()
