// Device time to host time, as Kineto maps CUPTI's GPU timestamps: when a profile starts,
// each device's clock (npuDeviceGetTimestamp) is read between two readings of the
// host's, and a device timestamp becomes host time by the difference. A vendor keeps
// this as it is: only the driver's clock behind npuDeviceGetTimestamp changes.
// Limits: one offset per device, sampled once per profile: a device clock that runs at
// another rate than the host's drifts by the rate difference over the profile (the
// emulated clock does not); the error of a sample is half the time between its two host
// readings (the best of a few tries, well under a microsecond here).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace backplane::npu::profiler {

class ClockMap {
 public:
  // Reads the clocks of devices 0 .. count-1 against host_now().
  void sample(c10::DeviceIndex count, int64_t (*host_now)());
  // device_ns on the clock of `device`, in host time; nullopt for a device not sampled.
  // Never throws: stream workers call it.
  std::optional<int64_t> to_host(c10::DeviceIndex device, int64_t device_ns) const;

 private:
  std::vector<int64_t> host_minus_device_;  // per device
};

}  // namespace backplane::npu::profiler
