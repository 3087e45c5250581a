// The allocators PyTorch finds for the npu device: device memory through the caching
// allocator (caching_allocator.h), registered as c10's DeviceAllocator for PrivateUse1,
// and pinned host memory through the caching host allocator (host_caching_allocator.h).
#pragma once

#include <c10/core/Allocator.h>

namespace backplane::npu {

c10::Allocator* device_allocator();
c10::Allocator* host_allocator();

}  // namespace backplane::npu
