// Devices, error strings and the test switches of the emulated driver.
#include "internal.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>

namespace npu_runtime {
namespace {

// The first malformed setting, as a message (empty: none). A bad value is never
// replaced by a default: the device would silently have another shape than asked for.
std::string& config_error() {
  static auto* error = new std::string();
  return *error;
}

int env_int(const char* name, int fallback, int lowest, int highest) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno == 0 && *end == '\0' && value >= lowest && value <= highest) return static_cast<int>(value);
  if (config_error().empty())
    config_error() = std::string(name) + "='" + text + "': expected an integer from " + std::to_string(lowest) +
                     " to " + std::to_string(highest);
  return -1;
}

std::atomic<bool> g_skip_host_waits{false};
thread_local int t_current_device = 0;

}  // namespace

int device_count() {
  static const int count = env_int("BACKPLANE_NPU_DEVICE_COUNT", 2, 0, 64);
  return count;
}

bool valid_device(int device) { return device >= 0 && device < device_count(); }

bool skip_host_waits() { return g_skip_host_waits.load(); }

int task_delay_ms() {
  static const int delay = std::max(0, env_int("BACKPLANE_NPU_TASK_DELAY_MS", 0, 0, 60000));
  return delay;
}

}  // namespace npu_runtime

using namespace npu_runtime;

const char* npuGetErrorString(npuError_t error) {
  switch (error) {
    case npuSuccess: return "no error";
    case npuErrorInvalidDevice: return "invalid device ordinal";
    case npuErrorInvalidValue: return "invalid argument";
    case npuErrorMemoryAllocation: return "out of memory";
    case npuErrorNotReady: return "not ready";
    case npuErrorLaunchFailure: return "a task queued on the stream failed";
    case npuErrorStreamCaptureUnsupported:
      return "not permitted while the stream captures a graph (a host wait or read of captured work; move it out of "
             "the capture)";
    case npuErrorStreamCaptureInvalidated: return "the capture was spoilt by a call refused during it";
    case npuErrorStreamCaptureUnmatched: return "capture begun on a capturing stream, or ended on one not capturing";
  }
  return "unknown error";
}

npuError_t npuGetDeviceCount(int* count) {
  if (count == nullptr) return npuErrorInvalidValue;
  *count = std::max(0, device_count());
  return device_count() < 0 ? npuErrorInvalidValue : npuSuccess;
}

const char* npuGetConfigError() {
  device_count();
  task_delay_ms();
  if (config_error().empty()) return memory_config_error();
  return config_error().c_str();
}

npuError_t npuGetDevice(int* device) {
  if (device == nullptr) return npuErrorInvalidValue;
  *device = t_current_device;
  return npuSuccess;
}

npuError_t npuSetDevice(int device) {
  if (!valid_device(device)) return npuErrorInvalidDevice;
  t_current_device = device;
  return npuSuccess;
}

// The emulated timer: the host's steady clock from the driver's start, plus the device
// index in seconds. The start is taken at the first read (a function static, safe from
// any thread); the steady clock never jumps, so device time never runs backwards.
npuError_t npuDeviceGetTimestamp(int device, int64_t* ns) {
  if (ns == nullptr) return npuErrorInvalidValue;
  if (!valid_device(device)) return npuErrorInvalidDevice;
  static const auto start = std::chrono::steady_clock::now();
  const auto since = std::chrono::steady_clock::now() - start;
  *ns = std::chrono::duration_cast<std::chrono::nanoseconds>(since).count() + int64_t{device} * 1'000'000'000;
  return npuSuccess;
}

void npuTestSetSkipHostWaits(bool skip) { g_skip_host_waits.store(skip); }
