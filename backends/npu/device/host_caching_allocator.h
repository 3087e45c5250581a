// The pinned host allocator, caching: freed pinned blocks are kept by size class (powers of
// two from 512 bytes) and handed out again, so non_blocking copies through pinned buffers
// do not pay npuMallocHost/npuFreeHost each time.
//
// A freed block is reusable at once, with no event: queued work holds the tensors it uses
// until it has run (launch.h), so a pinned tensor's memory is freed only after every copy
// that read or wrote it. A driver whose copies do not hold the tensor must record an event
// per copy and wait for it before reuse, as PyTorch's CachingHostAllocator does.
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>

namespace backplane::npu {

c10::Allocator* host_caching_allocator();

struct HostCacheStats {
  int64_t allocated_bytes;  // in pinned blocks handed out now (size classes, not requests)
  int64_t reserved_bytes;   // pinned memory taken from the driver: allocated + cached
  int64_t allocations;      // blocks handed out now
};
HostCacheStats host_cache_stats();
// Returns every cached (unused) pinned block to the driver.
void empty_host_cache();

}  // namespace backplane::npu
