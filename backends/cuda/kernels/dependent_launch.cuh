// Programmatic dependent launch (Hopper and later). Every kernel of this plugin is launched
// through launch_kernel(), which lets the driver start it while the kernel before it in the
// stream is still finishing: its blocks are scheduled, then hold in begin_after_previous_grid()
// until that kernel has completed and its writes are visible. What overlaps is the launch
// and block scheduling of one kernel with the tail of the one before, the gap that
// dominates kernels of a few microseconds (1M elements, decode rows) run back to back, as
// from a CUDA graph. Results are unchanged: nothing touches global memory before the wait.
//
// The rule every kernel here follows: begin_after_previous_grid() is its first statement. It
// waits, then lets the next kernel launch once all of this one's blocks have started (its
// own wait still holds it until this one has completed): its blocks take only slots this
// kernel's blocks leave free, since every block of this one is already running.
//
// On only where every architecture the plugin is compiled for has the instructions
// (CMAKE_CUDA_ARCHITECTURES all 90 or above: BACKPLANE_CUDA_DEPENDENT_LAUNCH, set by
// backends/cuda/CMakeLists.txt): a kernel compiled without the wait must never be launched
// early. BACKPLANE_CUDA_DEPENDENT_LAUNCH=0 in the environment launches every kernel as
// `<<<>>>` does (read once per process), to compare or to rule the feature out.
#pragma once

#include <c10/cuda/CUDAException.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace backplane::cuda {

// Waits until the kernel before this one in the stream has completed and its writes are
// visible (griddepcontrol.wait), then lets the next one launch (launch_dependents).
__device__ __forceinline__ void begin_after_previous_grid() {
#if BACKPLANE_CUDA_DEPENDENT_LAUNCH
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline bool dependent_launch_enabled() {
#if BACKPLANE_CUDA_DEPENDENT_LAUNCH
  static const bool enabled = [] {
    const char* v = std::getenv("BACKPLANE_CUDA_DEPENDENT_LAUNCH");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
#else
  return false;
#endif
}

// kernel<<<grid, block, 0, stream>>>(args...), as a dependent launch where enabled.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = dependent_launch_enabled() ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace backplane::cuda
