#include "profiler/clock_map.h"

#include "device/npu_stream.h"

#include <limits>

namespace backplane::npu::profiler {

void ClockMap::sample(c10::DeviceIndex count, int64_t (*host_now)()) {
  constexpr int kTries = 3;  // a reading the scheduler interrupted is not the one kept
  host_minus_device_.assign(count, 0);
  for (c10::DeviceIndex d = 0; d < count; ++d) {
    int64_t best_window = std::numeric_limits<int64_t>::max();
    for (int i = 0; i < kTries; ++i) {
      int64_t device_ns = 0;
      const int64_t before = host_now();
      check(npuDeviceGetTimestamp(d, &device_ns), "reading the device clock");
      const int64_t after = host_now();
      if (after - before >= best_window) continue;
      best_window = after - before;
      host_minus_device_[d] = before + (after - before) / 2 - device_ns;
    }
  }
}

std::optional<int64_t> ClockMap::to_host(c10::DeviceIndex device, int64_t device_ns) const {
  if (device < 0 || static_cast<size_t>(device) >= host_minus_device_.size()) return std::nullopt;
  return device_ns + host_minus_device_[device];
}

}  // namespace backplane::npu::profiler
