// The device allocator (npu memory, on the current device) and the pinned host
// allocator. No caching: each allocation is a driver call (see README: limits).
#pragma once

#include "runtime/npu_runtime.h"

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace backplane::npu {

c10::Allocator* device_allocator();
c10::Allocator* host_allocator();

// The driver's statistics for device `index` (checked), after releasing what finished
// work held, so that its memory counts as freed as soon as the host sees the work done.
// What torch.npu.memory_stats (c_api.cpp) and torch.accelerator.memory_stats (the
// device allocator's getDeviceStats) both read.
npuMemStats memory_stats(c10::DeviceIndex index);

}  // namespace backplane::npu
