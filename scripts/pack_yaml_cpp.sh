#!/usr/bin/env bash
# The GPU machine has no yaml-cpp and no network. This packs this machine's Debian
# yaml-cpp (headers, shared library, a small CMake package file) into .gpu/yaml-cpp,
# which git ignores; carry it to the device and pass YAML_CPP_DIR=$PWD/.gpu/yaml-cpp to
# scripts/gpu_verify.sh. libyaml-cpp needs only libc and libstdc++, which are there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu/yaml-cpp
lib=$(ls /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.* | head -1)
rm -rf "$dest" && mkdir -p "$dest/include" "$dest/lib"
cp -r /usr/include/yaml-cpp "$dest/include/"
cp "$lib" "$dest/lib/"
cat > "$dest/yaml-cpp-config.cmake" <<CMAKE
if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp SHARED IMPORTED)
  set_target_properties(yaml-cpp PROPERTIES
    IMPORTED_LOCATION \${CMAKE_CURRENT_LIST_DIR}/lib/$(basename "$lib")
    INTERFACE_INCLUDE_DIRECTORIES \${CMAKE_CURRENT_LIST_DIR}/include)
endif()
CMAKE
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
echo "packed $dest"
