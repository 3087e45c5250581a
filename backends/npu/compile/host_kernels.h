// Host kernels: Inductor's generated C++ (CPU) kernels run as device work. The
// emulated device keeps its memory in host memory, so code written for the CPU can
// compute on it once the tagged device addresses are translated; what makes it device
// work is that each call is queued on the current stream like any other kernel, so it
// is ordered with everything queued before and after it (eager ops, copies, other
// compiled kernels) and never reads a buffer that earlier work is still writing.
// A vendor's device replaces this with its own compiler's kernels and launch.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace backplane::npu {

// What generated code exports for the launch: tensors[k] is the host address of the
// k-th pointer argument, ints and floats the scalar arguments in order (the
// trampoline Inductor's kernel source gets appended, backplane_npu/_inductor.py).
using HostKernelEntry = void (*)(void* const* tensors, const int64_t* ints, const double* floats);

// Queues entry on the current stream of the tensors' device (all on one npu device, 0-dim
// CPU scalars aside); runs it at once where every tensor is on the CPU. The memory the
// tensors had at the call stays alive until it has run, and is what it reads and writes.
void launch_host_kernel(HostKernelEntry entry, const std::string& name, std::vector<at::Tensor> tensors,
                        std::vector<int64_t> ints, std::vector<double> floats);

}  // namespace backplane::npu
