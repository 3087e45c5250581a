// The bridge from the driver (runtime/) to PyTorch: devices, streams as c10::Stream,
// error checking. Each device has a default stream (id 0) and a pool of kPoolSize
// streams (ids 1..kPoolSize) handed out round-robin, as CUDA does; a current stream
// per thread and device.
#pragma once

#include "runtime/npu_runtime.h"

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace backplane::npu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr int kPoolSize = 4;

// TORCH_CHECK on a driver status, naming what was being done and the driver's error.
void check(npuError_t status, const char* what);

c10::DeviceIndex device_count();  // 0 when the driver's settings are malformed
// Raises naming a malformed driver setting (BACKPLANE_NPU_DEVICE_COUNT=3x).
void check_config();
c10::DeviceIndex current_device();
// "device index 5 out of range; expected 0 <= index < 2"
void check_index(c10::DeviceIndex index);
void set_device(c10::DeviceIndex index);  // checks the index
c10::DeviceIndex index_of(c10::Device device);  // npu -> current device; npu:i -> i

npuStream_t native(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex index);
c10::Stream current_stream(c10::DeviceIndex index);
// Sets the current stream, returns the previous; checks the device index only.
c10::Stream exchange_stream(const c10::Stream& stream);
c10::Stream pool_stream(c10::DeviceIndex index);

// Waits for the stream; raises the first failure of a task queued on it.
void synchronize(const c10::Stream& stream);

}  // namespace backplane::npu
