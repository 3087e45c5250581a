// A small C interface for python/backplane/npu.py (ctypes): what torch's generic
// device APIs (torch.accelerator, torch.Stream, torch.Event) do not cover. Every
// function returns 0 on success, or a driver error code.
#include "launch.h"
#include "npu_stream.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdio>
#include <string>

#define BACKPLANE_NPU_C_API extern "C" __attribute__((visibility("default")))

BACKPLANE_NPU_C_API int backplane_npu_device_count() { return backplane::npu::device_count(); }

// out[0]: bytes allocated now, out[1]: peak since start or reset, out[2]: live allocations.
BACKPLANE_NPU_C_API int backplane_npu_memory_stats(int device, int64_t* out) {
  npuMemStats stats{};
  const npuError_t status = npuMemGetStats(device, &stats);
  if (status != npuSuccess) return status;
  out[0] = stats.allocated_bytes;
  out[1] = stats.peak_bytes;
  out[2] = stats.allocations;
  return 0;
}

BACKPLANE_NPU_C_API int backplane_npu_reset_peak(int device) { return npuMemResetPeak(device); }

// Test switches (see runtime/npu_runtime.h).
BACKPLANE_NPU_C_API void backplane_npu_set_skip_host_waits(int skip) { npuTestSetSkipHostWaits(skip != 0); }

// Holds the current stream of `device` until backplane_npu_release(hold).
BACKPLANE_NPU_C_API void* backplane_npu_hold_current_stream(int device) {
  if (device < 0 || device >= backplane::npu::device_count()) return nullptr;
  npuHold_t hold = nullptr;
  npuTestHoldStream(backplane::npu::native(backplane::npu::current_stream(device)), &hold);
  return hold;
}

BACKPLANE_NPU_C_API int backplane_npu_release(void* hold) { return npuTestRelease(static_cast<npuHold_t>(hold)); }

// Queues work that fails with `message` on the current stream of `device`: the
// failure must surface at the next synchronize, as a kernel's would.
BACKPLANE_NPU_C_API void backplane_npu_queue_failure(int device, const char* message) {
  std::string text = message;
  backplane::npu::launch(static_cast<c10::DeviceIndex>(device), "test failure",
                         [text] { TORCH_CHECK(false, text); });
}

// Device queries and synchronization through the plugin's own checks, so the
// messages match C++ (an out-of-range index names the valid range). On failure,
// the message is written to `message` (size bytes) and 1 is returned.
namespace {
template <typename Fn>
int guarded(char* message, size_t size, Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const c10::Error& e) {
    std::snprintf(message, size, "%s", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::snprintf(message, size, "%s", e.what());
  }
  return 1;
}
}  // namespace

BACKPLANE_NPU_C_API int backplane_npu_current_device() { return backplane::npu::current_device(); }

BACKPLANE_NPU_C_API int backplane_npu_set_device(int device, char* message, size_t size) {
  return guarded(message, size, [&] { backplane::npu::set_device(static_cast<c10::DeviceIndex>(device)); });
}

// Waits for every stream of the device; raises the first failure of queued work.
BACKPLANE_NPU_C_API int backplane_npu_synchronize(int device, char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::DeviceIndex index = device < 0 ? backplane::npu::current_device() : device;
    backplane::npu::check_index(index);
    for (c10::StreamId id = 0; id <= backplane::npu::kPoolSize; ++id)
      backplane::npu::synchronize(c10::Stream(c10::Stream::UNSAFE, c10::Device(backplane::npu::kNpu, index), id));
  });
}
