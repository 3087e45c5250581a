// What the caching allocator reports: PyTorch's counters and the snapshot of its segments
// in torch.cuda.memory_snapshot()'s shape (caching_allocator.h states both).
#include "device/caching_allocator_stats.h"

#include "device/caching_allocator.h"
#include "device/caching_allocator_blocks.h"
#include "device/caching_allocator_events.h"

#include <sstream>

namespace backplane::npu::caching {
namespace detail {

using c10::CachingAllocator::StatType;

void update(c10::CachingAllocator::StatArray& stat, bool small, int64_t delta) {
  for (StatType type : {StatType::AGGREGATE, small ? StatType::SMALL_POOL : StatType::LARGE_POOL}) {
    auto& s = stat[static_cast<size_t>(type)];
    s.current += delta;
    s.peak = std::max(s.peak, s.current);
    if (delta > 0) s.allocated += delta;
    if (delta < 0) s.freed += -delta;
  }
}

int64_t cached_free_bytes(const Device& d) {
  return d.stats.reserved_bytes[0].current - d.stats.active_bytes[0].current;
}

}  // namespace detail

using c10::CachingDeviceAllocator::DeviceStats;
using namespace detail;

DeviceStats stats(c10::DeviceIndex index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  process_events(s);
  Device& d = s.devices.at(index);
  // inactive_split is counted here rather than kept: current only (its peak reads the same).
  d.stats.inactive_split = {};
  d.stats.inactive_split_bytes = {};
  for (Block* head : d.segments) {
    if (is_whole_segment(head)) continue;
    for (Block* b = head; b != nullptr; b = b->next) {
      if (!is_free(b)) continue;
      update(d.stats.inactive_split, b->pool->small, 1);
      update(d.stats.inactive_split_bytes, b->pool->small, static_cast<int64_t>(b->size));
    }
  }
  return d.stats;
}

namespace {

// Runs fn on every Stat of the device's StatArrays, under the mutex.
template <typename Fn>
DeviceStats& for_each_stat(c10::DeviceIndex index, Fn fn) {
  DeviceStats& st = state().devices.at(index).stats;
  for (auto* array : {&st.allocation, &st.segment, &st.active, &st.inactive_split, &st.allocated_bytes,
                      &st.reserved_bytes, &st.active_bytes, &st.inactive_split_bytes, &st.requested_bytes})
    for (auto& stat : *array) fn(stat);
  return st;
}

}  // namespace

void reset_peak_stats(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(state().mutex);
  for_each_stat(index, [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
}

void reset_accumulated_stats(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(state().mutex);
  DeviceStats& st = for_each_stat(index, [](c10::CachingAllocator::Stat& stat) { stat.reset_accumulated(); });
  st.num_alloc_retries = st.num_ooms = st.num_sync_all_streams = st.num_device_alloc = st.num_device_free = 0;
}

std::string snapshot_json(c10::DeviceIndex index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  process_events(s);
  Device& d = s.devices.at(index);
  std::ostringstream out;
  out << "[";
  const char* separator = "";
  for (Block* head : d.segments) {
    size_t total = 0, allocated = 0, active = 0, requested = 0;
    std::ostringstream blocks;
    const char* block_separator = "";
    for (Block* b = head; b != nullptr; b = b->next) {
      total += b->size;
      if (b->allocated) allocated += b->size, requested += b->requested;
      if (!is_free(b)) active += b->size;
      const char* state = b->allocated ? "active_allocated" : b->pending_events > 0 ? "active_pending_free" : "inactive";
      blocks << block_separator << "{\"address\": " << reinterpret_cast<uintptr_t>(b->ptr) << ", \"size\": " << b->size
             << ", \"requested_size\": " << (b->allocated ? b->requested : 0) << ", \"state\": \"" << state << "\"}";
      block_separator = ", ";
    }
    const PrivatePool* owner = head->pool->owner;
    const c10::MempoolId_t id = owner != nullptr ? owner->id : c10::MempoolId_t{0, 0};
    out << separator << "{\"device\": " << int(index) << ", \"address\": " << reinterpret_cast<uintptr_t>(head->ptr)
        << ", \"total_size\": " << total << ", \"allocated_size\": " << allocated << ", \"active_size\": " << active
        << ", \"requested_size\": " << requested << ", \"stream\": " << head->stream << ", \"segment_type\": \""
        << (head->pool->small ? "small" : "large") << "\", \"segment_pool_id\": [" << id.first << ", " << id.second
        << "], \"blocks\": [" << blocks.str() << "]}";
    separator = ", ";
  }
  out << "]";
  return out.str();
}

}  // namespace backplane::npu::caching
