// Shared by the runtime's own files; not part of the driver API.
#pragma once

#include "npu_runtime.h"

namespace npu_runtime {

int device_count();  // from BACKPLANE_NPU_DEVICE_COUNT, read once
bool valid_device(int device);
bool skip_host_waits();
int task_delay_ms();  // BACKPLANE_NPU_TASK_DELAY_MS, read once

}  // namespace npu_runtime
