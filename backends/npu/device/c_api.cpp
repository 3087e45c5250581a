// A small C interface for the backplane_npu package (python/backplane_npu/, through
// ctypes): what torch's generic device APIs (torch.accelerator, torch.Stream,
// torch.Event) do not cover. Every function that can fail returns 0 on success, else a
// driver error code or 1 with a message (guarded below).
#include "device/c_api.h"
#include "device/launch.h"
#include "device/npu_stream.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace backplane::npu {

c10::DeviceIndex device_index(int device) {
  if (device == -1) return current_device();
  TORCH_CHECK(device >= 0 && device < device_count(), "backplane npu: device index ", device,
              " out of range; expected 0 <= index < ", int(device_count()), " (or -1: the current device)");
  return static_cast<c10::DeviceIndex>(device);
}

}  // namespace backplane::npu

namespace {
using backplane::npu::device_index;
using backplane::npu::guarded;
}  // namespace

BACKPLANE_NPU_C_API int backplane_npu_device_count() { return backplane::npu::device_count(); }

// 0, or 1 with a message naming a malformed driver setting: the Python module refuses to
// install torch.npu over a device of another shape than was asked for.
BACKPLANE_NPU_C_API int backplane_npu_check_config(char* message, size_t size) {
  return guarded(message, size, [] { backplane::npu::check_config(); });
}

// Memory (statistics, caches, pools): memory_c_api.cpp.

// Test switches (see runtime/npu_runtime.h).
BACKPLANE_NPU_C_API void backplane_npu_set_skip_host_waits(int skip) { npuTestSetSkipHostWaits(skip != 0); }

// Holds the current stream of `device` until backplane_npu_release(*hold).
BACKPLANE_NPU_C_API int backplane_npu_hold_current_stream(int device, void** hold, char* message, size_t size) {
  return guarded(message, size, [&] {
    npuHold_t held = nullptr;
    backplane::npu::check(npuTestHoldStream(backplane::npu::native(backplane::npu::current_stream(device_index(device))), &held),
                          "holding a stream");
    *hold = held;
  });
}

BACKPLANE_NPU_C_API int backplane_npu_release(void* hold) { return npuTestRelease(static_cast<npuHold_t>(hold)); }

// Queues work that fails with `message` on the current stream of `device`: the
// failure must surface at the next synchronize, as a kernel's would.
BACKPLANE_NPU_C_API int backplane_npu_queue_failure(int device, const char* failure, char* message, size_t size) {
  return guarded(message, size, [&] {
    std::string text = failure;
    backplane::npu::launch(device_index(device), "test failure", [text] { TORCH_CHECK(false, text); });
  });
}

BACKPLANE_NPU_C_API int backplane_npu_current_device(char* message, size_t size) {
  int device = -1;
  return guarded(message, size, [&] { device = backplane::npu::current_device(); }) == 0 ? device : -1;
}

// Whether (device, id) names a stream: torch.npu.stream() asks first, because c10
// sets a current stream from a noexcept function that cannot refuse it.
BACKPLANE_NPU_C_API int backplane_npu_check_stream(int device, int64_t id, char* message, size_t size) {
  return guarded(message, size, [&] {
    backplane::npu::native(c10::Stream(c10::Stream::UNSAFE, c10::Device(backplane::npu::kNpu, device_index(device)), id));
  });
}

BACKPLANE_NPU_C_API int backplane_npu_set_device(int device, char* message, size_t size) {
  return guarded(message, size, [&] { backplane::npu::set_device(device_index(device)); });
}

// Waits for every stream of the device; raises the first failure of queued work.
BACKPLANE_NPU_C_API int backplane_npu_synchronize(int device, char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::DeviceIndex index = device_index(device);
    for (c10::StreamId id = 0; id <= backplane::npu::kPoolSize; ++id)
      backplane::npu::synchronize(c10::Stream(c10::Stream::UNSAFE, c10::Device(backplane::npu::kNpu, index), id));
  });
}
