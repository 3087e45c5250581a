// The caching allocator's blocks (caching_allocator_state.h): request and segment sizes,
// the best fit on a stream, the split of a block and the merge of freed neighbours, and
// segments taken from and returned to the driver. All under the state's mutex.
#pragma once

#include "device/caching_allocator_state.h"

#include <cstddef>

namespace backplane::npu::caching::detail {

// The request rounded up to the 512-byte granule every block has.
size_t round_size(size_t bytes);

bool is_whole_segment(const Block* b);
// Neither allocated nor waiting for events recorded at its free (null: false).
bool is_free(const Block* b);

// The pool a block of `size` (rounded) comes from: the small or large pool of `owner`, or
// of the device's general pool when `owner` is null.
Pool& pool_for(Device& d, PrivatePool* owner, size_t size);
// The best-fitting free block of `pool` for `size` on `stream`, taken out of the pool.
Block* take_free_block(Pool& pool, c10::StreamId stream, size_t size);
// A fresh segment from the driver for a request of `size`, as one free block not yet in
// `pool`; null when the driver refuses it.
Block* new_segment(Device& d, c10::DeviceIndex index, Pool& pool, c10::StreamId stream, size_t size);
// Cuts `size` bytes off the front of b when the rest is worth keeping as a block.
void split(Block* b, size_t size);
// A block that is neither allocated nor awaited joins its free neighbours and its pool;
// in a released private pool, a segment left whole goes back to the driver.
void return_block(Device& d, Block* b);
// Returns every whole free segment of `pool` to the driver.
void release_free_segments(Device& d, Pool& pool);
void release_general_cache(Device& d);

}  // namespace backplane::npu::caching::detail
