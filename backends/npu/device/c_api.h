// What the plugin's C functions for Python (ctypes) share: c_api.cpp, generator.cpp and
// profiler.cpp each export some (torch.npu's parts call them from python/backplane_npu).
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdio>
#include <exception>

#define BACKPLANE_NPU_C_API extern "C" __attribute__((visibility("default")))

namespace backplane::npu {

// No exception may leave a C function (ctypes cannot catch it: the process ends).
// Functions that can fail run through the plugin's own checks, so the messages match
// C++ (an out-of-range index names the valid range); on failure the message is
// written to `message` (size bytes) and 1 is returned, else 0.
template <typename Fn>
int guarded(char* message, size_t size, Fn&& fn) noexcept {
  try {
    fn();
    return 0;
  } catch (const c10::Error& e) {
    std::snprintf(message, size, "%s", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::snprintf(message, size, "%s", e.what());
  } catch (...) {
    std::snprintf(message, size, "backplane npu: unknown exception");
  }
  return 1;
}

// A device index from Python, checked before it narrows to c10's 8-bit DeviceIndex: -1
// is the current device (torch's convention), else 0 <= device < device_count(); any
// other is refused naming the index and the range. The Python side checks the same
// first (python/backplane_npu/_device_index.py), since ctypes narrows a Python int to an
// int without a word; this check holds for any other caller.
c10::DeviceIndex device_index(int device);

}  // namespace backplane::npu
