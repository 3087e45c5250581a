// The npu caching allocator (caching_allocator.h has the contract). One mutex guards the
// state of every device: simpler than CUDA's lock per device, and uncontended in practice
// (a stream worker never allocates). The mutex is never held while waiting for a stream.
#include "device/caching_allocator.h"

#include "device/launch.h"
#include "device/npu_stream.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace backplane::npu::caching {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;        // every request is rounded up to this
constexpr size_t kSmallSize = 1 << 20;       // requests up to this are "small"
constexpr size_t kSmallSegment = 2 << 20;    // small requests are cut from segments of this size
constexpr size_t kLargeSegment = 20 << 20;   // large requests under kMinLargeAlloc: segments of this
constexpr size_t kMinLargeAlloc = 10 << 20;  // larger ones get a segment of their own,
constexpr size_t kRoundLarge = 2 << 20;      // rounded up to this

struct Pool;
struct PrivatePool;

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;  // the stream current at allocation; the block serves only it
  char* ptr;
  size_t size;
  Pool* pool;
  size_t requested = 0;      // what the caller asked for (allocated blocks)
  bool allocated = false;
  int pending_events = 0;    // events recorded at a free with record_stream: reusable at 0
  std::set<c10::StreamId> uses;  // record_stream's streams other than `stream`
  Block* prev = nullptr;     // neighbours in the same segment
  Block* next = nullptr;
};

// Free blocks ordered by (stream, size, address): the best fit on a stream is a lower_bound.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
  }
};

struct Pool {
  bool small;
  PrivatePool* owner;  // null: the device's general pool
  std::set<Block*, BlockOrder> free_blocks;
};

struct PrivatePool {
  c10::MempoolId_t id;
  Pool small{true, this, {}};
  Pool large{false, this, {}};
  int references = 1;
  int segments = 0;
  bool released = false;
};

struct Route {  // an open begin_allocate_to_pool
  c10::MempoolId_t pool;
  std::function<bool(c10::Stream)> filter;
};

struct Device {
  Pool small{true, nullptr, {}};
  Pool large{false, nullptr, {}};
  std::set<Block*> segments;  // the first block of every segment, for snapshots and empty_cache
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> pools;
  std::vector<std::unique_ptr<PrivatePool>> released_pools;  // released, with live blocks left
  std::vector<Route> routes;
  DeviceStats stats;
};

struct State {
  std::mutex mutex;
  std::vector<Device> devices = std::vector<Device>(static_cast<size_t>(std::max<int>(0, device_count())));
  std::unordered_map<void*, Block*> allocated;  // by pointer handed out
  std::deque<std::pair<npuEvent_t, Block*>> pending;  // events of blocks freed after record_stream
};

State& state() {
  static State* instance = new State();  // never destroyed: tensors may outlive statics
  return *instance;
}

void update(c10::CachingAllocator::StatArray& stat, bool small, int64_t delta) {
  for (StatType type : {StatType::AGGREGATE, small ? StatType::SMALL_POOL : StatType::LARGE_POOL}) {
    auto& s = stat[static_cast<size_t>(type)];
    s.current += delta;
    s.peak = std::max(s.peak, s.current);
    if (delta > 0) s.allocated += delta;
    if (delta < 0) s.freed += -delta;
  }
}

size_t round_size(size_t bytes) { return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc) return kLargeSegment;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool is_whole_segment(const Block* b) { return b->prev == nullptr && b->next == nullptr; }
bool is_free(const Block* b) { return b != nullptr && !b->allocated && b->pending_events == 0; }

Pool& pool_for(Device& d, PrivatePool* owner, size_t size) {
  const bool small = size <= kSmallSize;
  if (owner == nullptr) return small ? d.small : d.large;
  return small ? owner->small : owner->large;
}

// The private pool an allocation on `stream` goes to, or null: the latest open route whose
// filter passes.
PrivatePool* routed_pool(Device& d, c10::Stream stream) {
  for (auto it = d.routes.rbegin(); it != d.routes.rend(); ++it)
    if (it->filter(stream)) return d.pools.at(it->pool).get();
  return nullptr;
}

// Returns a whole free segment to the driver.
void release_segment(Device& d, Block* b) {
  b->pool->free_blocks.erase(b);
  d.segments.erase(b);
  npuFree(b->ptr);
  update(d.stats.segment, b->pool->small, -1);
  update(d.stats.reserved_bytes, b->pool->small, -static_cast<int64_t>(b->size));
  d.stats.num_device_free += 1;
  if (PrivatePool* owner = b->pool->owner) owner->segments -= 1;
  delete b;
}

// Forgets released private pools whose last segment went back.
void drop_empty_released_pools(Device& d) {
  auto& v = d.released_pools;
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& p) { return p->segments == 0; }), v.end());
}

// A block that is neither allocated nor awaited joins its free neighbours and its pool.
void return_block(Device& d, Block* b) {
  for (Block* neighbour : {b->prev, b->next}) {
    if (!is_free(neighbour)) continue;
    neighbour->pool->free_blocks.erase(neighbour);
    if (neighbour == b->prev) {
      b->ptr = neighbour->ptr;
      b->prev = neighbour->prev;
      if (b->prev != nullptr) b->prev->next = b;
      else {  // b becomes the segment's first block
        d.segments.erase(neighbour);
        d.segments.insert(b);
      }
    } else {
      b->next = neighbour->next;
      if (b->next != nullptr) b->next->prev = b;
    }
    b->size += neighbour->size;
    delete neighbour;
  }
  b->pool->free_blocks.insert(b);
  PrivatePool* owner = b->pool->owner;
  if (owner != nullptr && owner->released && is_whole_segment(b)) {
    release_segment(d, b);
    drop_empty_released_pools(d);
  }
}

void finish_pending_block(Block* b) {
  Device& d = state().devices[b->device];
  b->pending_events -= 1;
  if (b->pending_events > 0) return;
  update(d.stats.active, b->pool->small, -1);
  update(d.stats.active_bytes, b->pool->small, -static_cast<int64_t>(b->size));
  return_block(d, b);
}

// Returns the blocks whose recorded events have all completed. Under the mutex.
// Every entry is queried: events of different streams complete in any order, and one held
// stream must not keep the blocks recorded on others from returning.
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

// Waits for every pending event without the mutex, then returns their blocks; also
// destroys finished work (release_finished_work), which may free blocks it held. The
// waited entries leave s.pending first, so no other thread destroys their events meanwhile.
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

// Frees every whole free segment of `pool`. Under the mutex.
void release_free_segments(Device& d, Pool& pool) {
  std::vector<Block*> whole;
  for (Block* b : pool.free_blocks)
    if (is_whole_segment(b)) whole.push_back(b);
  for (Block* b : whole) release_segment(d, b);
}

void release_general_cache(Device& d) {
  release_free_segments(d, d.small);
  release_free_segments(d, d.large);
}

// The best-fitting free block of `pool` for `size` on `stream`, taken out of the pool.
Block* take_free_block(Pool& pool, c10::StreamId stream, size_t size) {
  Block key{0, stream, nullptr, size, &pool};
  auto it = pool.free_blocks.lower_bound(&key);
  if (it == pool.free_blocks.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.free_blocks.erase(it);
  return b;
}

Block* new_segment(Device& d, c10::DeviceIndex index, Pool& pool, c10::StreamId stream, size_t size) {
  const size_t bytes = segment_size(size);
  void* ptr = nullptr;
  if (npuMalloc(&ptr, bytes, index) != npuSuccess) return nullptr;
  auto* b = new Block{index, stream, static_cast<char*>(ptr), bytes, &pool};
  d.segments.insert(b);
  update(d.stats.segment, pool.small, 1);
  update(d.stats.reserved_bytes, pool.small, static_cast<int64_t>(bytes));
  d.stats.num_device_alloc += 1;
  if (pool.owner != nullptr) pool.owner->segments += 1;
  return b;
}

// Cuts `size` bytes off the front of b when the rest is worth keeping as a block.
void split(Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (b->pool->small ? rest < kMinBlockSize : rest <= kSmallSize) return;
  auto* tail = new Block{b->device, b->stream, b->ptr + size, rest, b->pool};
  tail->prev = b;
  tail->next = b->next;
  if (b->next != nullptr) b->next->prev = tail;
  b->next = tail;
  b->size = size;
  b->pool->free_blocks.insert(tail);
}

int64_t cached_free_bytes(const Device& d) {
  return d.stats.reserved_bytes[0].current - d.stats.active_bytes[0].current;
}

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

bool is_general(c10::MempoolId_t id) { return id.first == 0 && id.second == 0; }

std::string pool_id_text(c10::MempoolId_t id) {
  std::ostringstream out;  // not string operator+: GCC 12 warns falsely (-Wstringop-overflow) on that
  out << "(" << id.first << ", " << id.second << ")";
  return out.str();
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
  if (b->pending_events > 0) return;  // active until its events complete (process_events)
  update(d.stats.active, small, -1);
  update(d.stats.active_bytes, small, -static_cast<int64_t>(b->size));
  return_block(d, b);
}

void record_stream(void* ptr, c10::Stream stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocated.find(ptr);
  if (it == s.allocated.end()) return;
  Block* b = it->second;
  TORCH_CHECK(stream.device_type() == kNpu && stream.device_index() == b->device,
              "backplane npu: record_stream of memory on npu:", int(b->device), " expects a stream of npu:",
              int(b->device), ", got ", stream);
  if (stream.id() != b->stream) b->uses.insert(stream.id());
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

// Runs fn on every Stat of the device's StatArrays, under the mutex.
template <typename Fn>
DeviceStats& for_each_stat(c10::DeviceIndex index, Fn fn) {
  DeviceStats& st = state().devices.at(index).stats;
  for (auto* array : {&st.allocation, &st.segment, &st.active, &st.inactive_split, &st.allocated_bytes,
                      &st.reserved_bytes, &st.active_bytes, &st.inactive_split_bytes, &st.requested_bytes})
    for (auto& stat : *array) fn(stat);
  return st;
}

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

void begin_allocate_to_pool(c10::DeviceIndex index, c10::MempoolId_t pool, std::function<bool(c10::Stream)> filter) {
  TORCH_CHECK(!is_general(pool), "backplane npu: a private memory pool needs an id other than (0, 0)");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device& d = s.devices.at(index);
  for (const Route& r : d.routes)
    TORCH_CHECK(r.pool != pool, "backplane npu: memory pool ", pool_id_text(pool), " on npu:", int(index),
                " already has allocations routed to it; expected end_allocate_to_pool first");
  auto& entry = d.pools[pool];
  if (entry == nullptr) {
    entry = std::make_unique<PrivatePool>();
    entry->id = pool;
  } else {
    entry->references += 1;
  }
  d.routes.push_back(Route{pool, std::move(filter)});
}

void end_allocate_to_pool(c10::DeviceIndex index, c10::MempoolId_t pool) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& routes = s.devices.at(index).routes;
  auto it = std::find_if(routes.begin(), routes.end(), [&](const Route& r) { return r.pool == pool; });
  TORCH_CHECK(it != routes.end(), "backplane npu: end_allocate_to_pool: no allocations are routed to memory pool ",
              pool_id_text(pool), " on npu:", int(index), "; expected a begin_allocate_to_pool first");
  routes.erase(it);
}

void release_pool(c10::DeviceIndex index, c10::MempoolId_t pool) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device& d = s.devices.at(index);
  auto it = d.pools.find(pool);
  TORCH_CHECK(it != d.pools.end(), "backplane npu: release_pool: no memory pool ", pool_id_text(pool), " on npu:",
              int(index));
  for (const Route& r : d.routes)
    TORCH_CHECK(r.pool != pool, "backplane npu: release_pool: memory pool ", pool_id_text(pool), " on npu:",
                int(index), " still has allocations routed to it; expected end_allocate_to_pool first");
  PrivatePool& p = *it->second;
  if (--p.references > 0) return;
  p.released = true;
  release_free_segments(d, p.small);
  release_free_segments(d, p.large);
  if (p.segments > 0) d.released_pools.push_back(std::move(it->second));  // live blocks: freed as they go
  d.pools.erase(it);
}

c10::MempoolId_t new_pool_id() {
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next++};
}

}  // namespace backplane::npu::caching
