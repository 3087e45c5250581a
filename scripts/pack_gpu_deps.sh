#!/usr/bin/env bash
# The GPU machine has no yaml-cpp, GoogleTest or Google Benchmark, and no network.
# This packs this machine's Debian builds of them into .gpu/ (git ignores it):
#   .gpu/yaml-cpp   headers, libyaml-cpp.so and a small CMake package file
#   .gpu/prefix     gtest/gmock static libraries and libbenchmark, laid out as under
#                   /usr so their own CMake package files find them
# Carry .gpu to the device and run scripts/gpu_verify.sh with GPU_DEPS=$PWD/.gpu.
# The libraries need only libc and libstdc++, which the device has.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=lib/x86_64-linux-gnu
rm -rf .gpu/yaml-cpp .gpu/prefix
mkdir -p .gpu/yaml-cpp/include .gpu/yaml-cpp/lib ".gpu/prefix/include" ".gpu/prefix/$arch/cmake"

lib=$(ls /usr/$arch/libyaml-cpp.so.0.* | head -1)
cp -r /usr/include/yaml-cpp .gpu/yaml-cpp/include/
cp "$lib" .gpu/yaml-cpp/lib/
cat > .gpu/yaml-cpp/yaml-cpp-config.cmake <<CMAKE
if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp SHARED IMPORTED)
  set_target_properties(yaml-cpp PROPERTIES
    IMPORTED_LOCATION \${CMAKE_CURRENT_LIST_DIR}/lib/$(basename "$lib")
    INTERFACE_INCLUDE_DIRECTORIES \${CMAKE_CURRENT_LIST_DIR}/include)
endif()
CMAKE

for dir in gtest gmock benchmark; do
  [ -d "/usr/include/$dir" ] && cp -r "/usr/include/$dir" .gpu/prefix/include/
done
cp -a /usr/$arch/libgtest*.a /usr/$arch/libbenchmark* ".gpu/prefix/$arch/"
cp -r /usr/$arch/cmake/GTest /usr/$arch/cmake/benchmark ".gpu/prefix/$arch/cmake/"

du -sh .gpu
