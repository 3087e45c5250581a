// Launching a recorded Triton kernel through the CUDA driver API, reached with
// dlopen("libcuda.so.1") when first needed: the bridge gains no link dependency on CUDA, and a
// CPU build (or a machine without a driver) only fails the first replay, with the reason.
#pragma once

#include "triton_launch_cache.h"

#include <string>

namespace backplane::python_kernels {

// cuLaunchKernel of `launch` on `stream` (a cudaStream_t) of `device`, making the device's
// primary context current first if no context is (a thread that has not used CUDA yet).
// "" or the driver's error.
std::string cuda_launch(const KernelLaunch& launch, void** params, const uint64_t* slots, void* stream,
                        c10::DeviceIndex device);

// The current stream of CUDA device `device`, through c10's device-generic interface (no
// link to c10_cuda).
void* current_cuda_stream(c10::DeviceIndex device);

}  // namespace backplane::python_kernels
