// The npu caching allocator's entry points (caching_allocator.h has the contract): an
// allocation, a free and empty_cache. The rest is in files of its own, each on one part
// of the state (caching_allocator_state.h): caching_allocator_blocks (sizes, best fit,
// split and merge, segments), caching_allocator_events (record_stream's events),
// caching_allocator_pools (private pools), caching_allocator_stats (counters, snapshot).
#include "device/caching_allocator.h"

#include "device/caching_allocator_blocks.h"
#include "device/caching_allocator_events.h"
#include "device/caching_allocator_pools.h"
#include "device/caching_allocator_stats.h"

#include <c10/util/Exception.h>

namespace backplane::npu::caching {
namespace detail {

State& state() {
  static State* instance = new State();  // never destroyed: tensors may outlive statics
  return *instance;
}

}  // namespace detail

using namespace detail;

namespace {

[[noreturn]] void out_of_memory(Device& d, c10::DeviceIndex index, size_t bytes) {
  d.stats.num_ooms += 1;
  size_t free_bytes = 0, total_bytes = 0;
  npuMemGetInfo(index, &free_bytes, &total_bytes);
  TORCH_CHECK_WITH(OutOfMemoryError, false, "backplane npu: allocating ", bytes, " bytes on npu:", int(index),
                   " failed: out of memory; the device has ", total_bytes, " bytes, ", free_bytes, " free; ",
                   d.stats.allocated_bytes[0].current, " bytes are allocated to tensors and ",
                   d.stats.reserved_bytes[0].current, " reserved by the caching allocator (", cached_free_bytes(d),
                   " cached, unused; the cache was emptied of whole free segments before this error). "
                   "Free tensors or call torch.npu.empty_cache() to return cached memory to the device; memory "
                   "of a graph's private pool returns when the graph is released");
}

}  // namespace

void* allocate(c10::DeviceIndex index, size_t bytes) {
  if (bytes == 0) return nullptr;
  const c10::Stream stream = current_stream(index);
  const size_t size = round_size(bytes);
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  Device& d = s.devices.at(index);
  process_events(s);
  PrivatePool* owner = routed_pool(d, stream);
  Pool& pool = pool_for(d, owner, size);
  Block* b = take_free_block(pool, stream.id(), size);
  if (b == nullptr) b = new_segment(d, index, pool, stream.id(), size);
  if (b == nullptr) {  // the driver refused: give back what the cache holds, once
    d.stats.num_alloc_retries += 1;
    wait_for_pending(lock, index);
    b = take_free_block(pool, stream.id(), size);  // the wait may have returned blocks here
    if (b == nullptr) {
      release_general_cache(d);
      b = new_segment(d, index, pool, stream.id(), size);
    }
    if (b == nullptr) out_of_memory(d, index, bytes);
  }
  split(b, size);
  b->allocated = true;
  b->requested = bytes;
  s.allocated[b->ptr] = b;
  update(d.stats.allocation, pool.small, 1);
  update(d.stats.allocated_bytes, pool.small, static_cast<int64_t>(b->size));
  update(d.stats.active, pool.small, 1);
  update(d.stats.active_bytes, pool.small, static_cast<int64_t>(b->size));
  update(d.stats.requested_bytes, pool.small, static_cast<int64_t>(bytes));
  return b->ptr;
}

void free(void* ptr) {
  if (ptr == nullptr) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocated.find(ptr);
  if (it == s.allocated.end()) return;  // not ours: nothing to free (a deleter cannot raise)
  Block* b = it->second;
  s.allocated.erase(it);
  Device& d = s.devices[b->device];
  const bool small = b->pool->small;
  b->allocated = false;
  update(d.stats.allocation, small, -1);
  update(d.stats.allocated_bytes, small, -static_cast<int64_t>(b->size));
  update(d.stats.requested_bytes, small, -static_cast<int64_t>(b->requested));
  record_use_events(s, b);
  if (b->pending_events > 0) return;  // active until its events complete (process_events)
  update(d.stats.active, small, -1);
  update(d.stats.active_bytes, small, -static_cast<int64_t>(b->size));
  return_block(d, b);
}

void empty_cache(c10::DeviceIndex index, c10::MempoolId_t pool) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  Device& d = s.devices.at(index);
  wait_for_pending(lock, -1);
  if (is_general(pool)) return release_general_cache(d);
  auto it = d.pools.find(pool);
  TORCH_CHECK(it != d.pools.end(), "backplane npu: empty_cache: no memory pool ", pool_id_text(pool), " on npu:",
              int(index));
  release_free_segments(d, it->second->small);
  release_free_segments(d, it->second->large);
}

}  // namespace backplane::npu::caching
