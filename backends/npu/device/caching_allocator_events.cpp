// Events of blocks freed after record_stream (caching_allocator_events.h).
#include "device/caching_allocator_events.h"

#include "device/caching_allocator.h"
#include "device/caching_allocator_blocks.h"
#include "device/caching_allocator_stats.h"
#include "device/launch.h"

#include <c10/util/Exception.h>

namespace backplane::npu::caching {
namespace detail {
namespace {

void finish_pending_block(Block* b) {
  Device& d = state().devices[b->device];
  b->pending_events -= 1;
  if (b->pending_events > 0) return;
  update(d.stats.active, b->pool->small, -1);
  update(d.stats.active_bytes, b->pool->small, -static_cast<int64_t>(b->size));
  return_block(d, b);
}

}  // namespace

void record_use_events(State& s, Block* b) {
  for (c10::StreamId use : b->uses) {
    npuEvent_t event = nullptr;
    const npuStream_t stream = native(c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, b->device), use));
    if (npuEventCreate(&event, npuEventDefault) != npuSuccess || npuEventRecord(event, stream) != npuSuccess) {
      if (event != nullptr) npuEventDestroy(event);
      npuStreamSynchronize(stream);  // cannot record (the driver failed): wait instead, never reuse early
      continue;
    }
    s.pending.emplace_back(event, b);
    b->pending_events += 1;
  }
  b->uses.clear();
}

void process_events(State& s) {
  for (auto it = s.pending.begin(); it != s.pending.end();) {
    auto [event, block] = *it;
    if (npuEventQuery(event) != npuSuccess) {
      ++it;
      continue;
    }
    it = s.pending.erase(it);
    npuEventDestroy(event);
    finish_pending_block(block);
  }
}

// The waited entries leave s.pending first, so no other thread destroys their events meanwhile.
void wait_for_pending(std::unique_lock<std::mutex>& lock, c10::DeviceIndex counted_on) {
  State& s = state();
  std::deque<std::pair<npuEvent_t, Block*>> waited;
  waited.swap(s.pending);
  if (counted_on >= 0) s.devices[counted_on].stats.num_sync_all_streams += 1;
  lock.unlock();
  release_finished_work();
  for (const auto& entry : waited) npuEventSynchronize(entry.first);  // a failed task still completes its event
  lock.lock();
  for (const auto& [event, block] : waited) {
    npuEventDestroy(event);
    finish_pending_block(block);
  }
  process_events(s);
}

}  // namespace detail

void record_stream(void* ptr, c10::Stream stream) {
  detail::State& s = detail::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocated.find(ptr);
  if (it == s.allocated.end()) return;
  detail::Block* b = it->second;
  TORCH_CHECK(stream.device_type() == kNpu && stream.device_index() == b->device,
              "backplane npu: record_stream of memory on npu:", int(b->device), " expects a stream of npu:",
              int(b->device), ", got ", stream);
  if (stream.id() != b->stream) b->uses.insert(stream.id());
}

}  // namespace backplane::npu::caching
