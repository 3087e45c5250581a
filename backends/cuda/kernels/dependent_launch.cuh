// Programmatic dependent launch (Hopper and later). Every kernel of this plugin is launched
// through launch_kernel(), which lets the driver start it while the kernel before it in the
// stream is still finishing: its blocks are scheduled, then hold in
// begin_after_previous_grid(launch) until that kernel has completed and its writes are
// visible. What overlaps is the launch and block scheduling of one kernel with the tail of
// the one before, the gap that dominates kernels of a few microseconds (1M elements, decode
// rows) run back to back, as from a CUDA graph. Results are unchanged: nothing touches global memory before the wait.
//
// The rule every kernel here follows: its first parameter is a LaunchControl, and
// begin_after_previous_grid(launch) is its first statement. That waits, then, where
// launch_kernel() found the grid has few blocks (at most 8 a multiprocessor), lets the next
// kernel launch (griddepcontrol.launch_dependents), whose blocks are scheduled and hold in
// their own wait. A larger grid leaves the trigger to the exit of its blocks. Against the
// trigger in every grid and in none (from CUDA graphs; see bench/results/):
// - small grids gain from it: 1M bfloat16 elements (1024 blocks of 128 threads), rms_norm
//   decode rows, softmax's 32 rows;
// - a grid of many short blocks loses to it: 1M float32 elements, dense (2048 one-vector
//   blocks). That is the instruction's own cost, with the launch attribute or without it,
//   not a matter of free slots.
// The rule is a heuristic on that: the float32 row broadcast (2048 blocks of the strided
// kernel) gained a little from the trigger, which it now goes without, and grids sized to
// the resident blocks (softmax's many rows, the backward kernels) were not timed both ways.
// The choice is the host's, passed in: a flag read from the parameters costs less than
// deciding in the kernel from %nsmid and gridDim.
//
// On only where every architecture the plugin is compiled for has the instructions
// (CMAKE_CUDA_ARCHITECTURES all 90 or above: BACKPLANE_CUDA_DEPENDENT_LAUNCH, set by
// backends/cuda/CMakeLists.txt): a kernel compiled without the wait must never be launched
// early. BACKPLANE_CUDA_DEPENDENT_LAUNCH=0 in the environment launches every kernel as
// `<<<>>>` does (read once per process), to compare or to rule the feature out.
#pragma once

#include "launch_config.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace backplane::cuda {

// Every kernel's first parameter, filled in by launch_kernel().
struct LaunchControl {
  bool trigger_next;  // let the next kernel in the stream launch right after the wait
};

// Waits until the kernel before this one in the stream has completed and its writes are
// visible (griddepcontrol.wait); then, where launch_kernel() said so, lets the next kernel
// launch. Both are no-ops in a kernel not launched as a dependent launch.
__device__ __forceinline__ void begin_after_previous_grid(LaunchControl launch) {
#if BACKPLANE_CUDA_DEPENDENT_LAUNCH
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (launch.trigger_next) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#else
  (void)launch;
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

// Whether a grid has few enough blocks for the early trigger to pay: at most 8 a
// multiprocessor (1M bfloat16 elements on an H100: 1024 blocks on 132; 1M float32 elements:
// 2048). A heuristic (above): nothing but timing depends on it. The current device costs a
// cudaGetDevice a launch.
inline bool few_blocks_for_early_trigger(dim3 grid) {
  constexpr int64_t kBlocksPerMultiprocessor = 8;
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  return blocks <= kBlocksPerMultiprocessor * multiprocessor_count(c10::cuda::current_device());
}

// kernel<<<grid, block, 0, stream>>>(control, args...), as a dependent launch where enabled;
// the kernel's LaunchControl comes from here. The current device is the stream's (the
// caller holds a CUDAGuard).
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(LaunchControl, Params...), dim3 grid, dim3 block, cudaStream_t stream,
                   Args&&... args) {
  const bool dependent = dependent_launch_enabled();
  const LaunchControl control{dependent && few_blocks_for_early_trigger(grid)};
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, control, std::forward<Args>(args)...));
}

}  // namespace backplane::cuda
