// How the kernels a stream worker runs reach a profiler. device/launch.cpp asks for the
// timer where work is queued and where it runs; the profiler part (profiler/profiler.cpp)
// sets it as a profile starts and clears it as the profile stops. A device made without
// that part (`backplane new-backend --without profiler`) never sets one: nothing is timed
// and nothing outside profiler/ names the profiler.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace backplane::npu {

class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  // The profiled op running on the calling thread (0: none); work queued now is
  // attributed to it.
  virtual uint64_t current_op() const = 0;
  // The clock a worker stamps a kernel with (its stream's device's own clock).
  virtual int64_t now_ns() const = 0;
  // A kernel has run on a worker, from start_ns to end_ns (now_ns). Must never take the GIL.
  virtual void record(const std::string& name, c10::DeviceIndex device, c10::StreamId stream, uint64_t op,
                      int64_t start_ns, int64_t end_ns) const = 0;
};

namespace detail {
inline std::atomic<const KernelTimer*> g_kernel_timer{nullptr};
}

// The timer while a profile records the device's kernels, else nullptr. This load, once
// where work is queued and once where it runs, is all a profiler costs while it is off.
inline const KernelTimer* kernel_timer() { return detail::g_kernel_timer.load(std::memory_order_acquire); }

// `timer` must outlive every stream worker (never destroyed); nullptr stops the timing.
inline void set_kernel_timer(const KernelTimer* timer) {
  detail::g_kernel_timer.store(timer, std::memory_order_release);
}

}  // namespace backplane::npu
