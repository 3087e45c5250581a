// The npu caching allocator: device memory in blocks cut from driver segments
// (npuMalloc), kept for reuse after they are freed, in the manner of PyTorch's CUDA
// caching allocator (c10/cuda/CUDACachingAllocator.cpp).
//
// - A block belongs to the stream current at its allocation. Freed, it returns to that
//   stream's free blocks and is handed out again only to allocations on the same stream:
//   work queued there later runs after the work that used it, so no wait is needed.
// - A block that record_stream marked as used on other streams is not reusable until the
//   work queued on those streams up to its free has run: the free records an event on
//   each, and the block returns to its pool once every event has completed.
// - Requests are rounded up to 512 bytes. Small ones (<= 1 MiB) are cut from 2 MiB
//   segments; larger ones from 20 MiB segments (requests under 10 MiB) or from segments
//   of their own size rounded up to 2 MiB. The best-fitting free block is split; freed
//   neighbours merge again.
// - When the driver refuses a segment, unused cached segments are returned to it and the
//   request is retried once; then it fails with c10::OutOfMemoryError (see oom_message).
// Thread-safe: one mutex per device. Frees may come from any thread; nothing here takes
// the GIL or waits for a stream worker except the retry after a refused segment (it waits
// for the events above, which workers complete without the GIL).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

namespace backplane::npu::caching {

// A block of at least `bytes` on the current stream of device `index` (an index already
// checked). 0 bytes: nullptr. The returned pointer is the block's start; free() takes it.
void* allocate(c10::DeviceIndex index, size_t bytes);
// Returns a block from allocate() (nullptr: nothing). Safe from any thread.
void free(void* ptr);
// Marks the block holding `ptr` as used by work queued on `stream`: see the top of this
// file. A stream equal to the block's own, or a pointer this allocator did not hand out
// (memory from another allocator: at::from_blob), is ignored, as CUDA does.
void record_stream(void* ptr, c10::Stream stream);

// Returns unused segments of device `index` to the driver, after waiting for the events
// of blocks freed with record_stream. pool {0, 0}: the general pool's segments only (a live
// private pool keeps its free blocks: a captured graph replays into them); another id: that
// private pool's free segments (raises if there is no such pool).
void empty_cache(c10::DeviceIndex index, c10::MempoolId_t pool = {0, 0});

// PyTorch's counters (c10::CachingDeviceAllocator::DeviceStats): allocation, segment,
// active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
// inactive_split_bytes, requested_bytes for all/small/large pools, num_alloc_retries,
// num_ooms, num_device_alloc, num_device_free, num_sync_all_streams. Blocks waiting for
// recorded events count as active.
c10::CachingDeviceAllocator::DeviceStats stats(c10::DeviceIndex index);
void reset_peak_stats(c10::DeviceIndex index);
void reset_accumulated_stats(c10::DeviceIndex index);

// The state of every segment of device `index` as JSON, the shape of
// torch.cuda.memory_snapshot()'s segments: a list of {"device", "address", "total_size",
// "allocated_size", "active_size", "requested_size", "stream", "segment_type"
// ("small"|"large"), "segment_pool_id": [a, b], "blocks": [{"address", "size",
// "requested_size", "state": "active_allocated"|"active_pending_free"|"inactive"}]}.
std::string snapshot_json(c10::DeviceIndex index);

// --- private pools, for graph capture (CUDA's beginAllocateToPool) ---------------------
// A private pool is a set of segments of its own, named by a MempoolId_t other than
// {0, 0} (the caller picks ids; graph capture uses {capture id, 0} as CUDA does). Its
// blocks are never handed to allocations outside the pool, and its segments never go back
// to the general blocks: memory a captured graph replays into stays the graph's.
//
// begin_allocate_to_pool(index, pool, filter): from now on, an allocation on device
// `index` whose current stream passes filter(stream) is served from `pool` (created on
// first use). Several begins may be open on a device at once (several captures); an
// allocation takes the most recent whose filter passes. Each begin also takes a reference
// to the pool (the first begin creates it with one). Raises if `pool` is {0, 0} or a
// begin for the same (index, pool) is already open.
void begin_allocate_to_pool(c10::DeviceIndex index, c10::MempoolId_t pool,
                            std::function<bool(c10::Stream)> filter);
// Stops routing allocations to `pool` on device `index` (the begin's filter is dropped).
// Blocks allocated from the pool and freed later still return to the pool, and later
// begins for the same id reuse its free blocks (a graph replayed or captured again into
// the same pool). Raises if no begin for (index, pool) is open.
void end_allocate_to_pool(c10::DeviceIndex index, c10::MempoolId_t pool);
// Drops one reference to `pool` (taken by begin_allocate_to_pool). At zero the pool is
// released: its free segments go back to the driver at once, and each remaining segment
// as soon as its last live block is freed; the id may then be used for a new pool.
// Raises if the pool does not exist or still has a begin open.
void release_pool(c10::DeviceIndex index, c10::MempoolId_t pool);
// A fresh id for a pool ({0, n}, n > 0, unique in the process), as
// torch.cuda.graph_pool_handle() gives.
c10::MempoolId_t new_pool_id();

}  // namespace backplane::npu::caching
