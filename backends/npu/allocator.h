// The device allocator (npu memory, on the current device) and the pinned host
// allocator. No caching: each allocation is a driver call (see README: limits).
#pragma once

#include <c10/core/Allocator.h>

namespace backplane::npu {

c10::Allocator* device_allocator();
c10::Allocator* host_allocator();

}  // namespace backplane::npu
