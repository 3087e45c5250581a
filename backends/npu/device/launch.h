// Running work on the device: what a kernel launch is in this stub.
#pragma once

#include "device/npu_stream.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

namespace backplane::npu {

// Queues fn on the current stream of device `index`; it runs on that stream's worker
// after everything queued before it, and the call returns at once. Tensors captured
// by value in fn stay alive (and their memory allocated) until fn has run, and are
// released later by a thread that queues or waits for work (release_finished_work),
// never by the worker. A failure inside fn is reported, naming `what`, by the next
// synchronize of that stream. While torch.profiler records the device (kernel_timer.h), the
// worker times fn and reports it as the kernel `what` on its stream.
void launch(c10::DeviceIndex index, std::string what, std::function<void()> fn);
// The same on a given stream.
void launch_on(const c10::Stream& stream, std::string what, std::function<void()> fn);

// Destroys the functions that have run, and the tensors they captured, on the calling
// thread. A worker must never need the GIL, and dropping the last reference to a tensor
// with a Python object does. Called by launch and synchronize; memory stays held until
// the next of those.
void release_finished_work();

// While one is alive on a thread, release_finished_work does nothing there: for code
// inside c10 or allocator internals (copy_data, called by copy-on-write materialization
// with a storage lock held), where running arbitrary destructors could re-enter a lock.
class ReleaseDeferred {
 public:
  ReleaseDeferred();
  ~ReleaseDeferred();
  ReleaseDeferred(const ReleaseDeferred&) = delete;
  ReleaseDeferred& operator=(const ReleaseDeferred&) = delete;
};

// Inside a launched fn only: a CPU tensor over t's memory (same sizes, strides, dtype,
// conj and neg bits), so the emulated kernel can compute with ATen's CPU code. CPU
// tensors are returned as they are. This is the one place a real backend differs:
// its kernels run on the device and never see host pointers.
at::Tensor host_view(const at::Tensor& t);

// Whether t is on the npu device.
inline bool is_npu(const at::Tensor& t) { return t.device().type() == kNpu; }

}  // namespace backplane::npu
