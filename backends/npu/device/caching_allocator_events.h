// The caching allocator's stream bookkeeping (caching_allocator.h: record_stream): a block
// used on streams other than its own is reusable only once the work queued there up to its
// free has run. Its free records an event on each such stream; the block stays active,
// counted in State::pending, until every one of its events has completed.
#pragma once

#include "device/caching_allocator_state.h"

namespace backplane::npu::caching::detail {

// At the free of `b`: records an event on each stream of b->uses (then cleared) and counts
// it in b->pending_events. Where the driver cannot record one, waits for that stream
// instead (never an early reuse). Under the mutex.
void record_use_events(State& s, Block* b);
// Returns the blocks whose recorded events have all completed. Under the mutex. Every
// entry is queried: events of different streams complete in any order, and one held
// stream must not keep the blocks recorded on others from returning.
void process_events(State& s);
// Waits for every pending event without the mutex (unlocked and locked again through
// `lock`), then returns their blocks; also destroys finished work (release_finished_work),
// which may free blocks it held. `counted_on` >= 0: counts a num_sync_all_streams there.
void wait_for_pending(std::unique_lock<std::mutex>& lock, c10::DeviceIndex counted_on);

}  // namespace backplane::npu::caching::detail
