// The caching allocator's counters, PyTorch's (c10::CachingDeviceAllocator::DeviceStats):
// the allocator's other files keep them with update(); caching_allocator_stats.cpp has
// caching::stats, the resets and snapshot_json (caching_allocator.h), which read them.
#pragma once

#include "device/caching_allocator_state.h"

#include <cstdint>

namespace backplane::npu::caching::detail {

// Adds `delta` to the all-pools entry of `stat` and to its small or large pool's, with
// the peak and the allocated/freed totals.
void update(c10::CachingAllocator::StatArray& stat, bool small, int64_t delta);
// Reserved bytes that no block holds active: what the cache keeps unused.
int64_t cached_free_bytes(const Device& d);

}  // namespace backplane::npu::caching::detail
