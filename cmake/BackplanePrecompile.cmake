# Precompiled torch headers for the targets with many C++ files. Parsing torch/library.h
# and the dispatcher is most of each file's compile time: precompiled once per target (a
# large header image), they pay off from about five files a target. The C++ files of a
# target share one image (CMake builds it with the target's own flags, so the CPU
# kernels' AVX2 and AVX512 builds each get theirs); CUDA files are left alone.
# A plugin asks for it with backplane_add_plugin(... PRECOMPILE_TORCH_HEADERS), in this
# repository and out of tree (installed beside BackplanePlugin.cmake, which includes it).
#   -DBACKPLANE_PCH=OFF   compile without
option(BACKPLANE_PCH "Precompile torch's headers for the larger targets" ON)

function(backplane_precompile_torch target)
  if(NOT BACKPLANE_PCH)
    return()
  endif()
  # CMake's Makefile generator writes every file's precompiled-header flags into one
  # flags.make a target, on which each object depends: a file added or removed (a new
  # kernel in a globbed folder) rewrites it and recompiles the whole target. Ninja keeps
  # them per file.
  if(CMAKE_GENERATOR MATCHES "Makefiles")
    message(STATUS "${target}: precompiled torch headers under ${CMAKE_GENERATOR}: adding or removing a "
                   "source file recompiles every file of ${target}; -G Ninja recompiles only what changed")
  endif()
  target_precompile_headers(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:<torch/library.h$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<ATen/core/dispatch/Dispatcher.h$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<ATen/core/Tensor.h$<ANGLE-R>>")
endfunction()
