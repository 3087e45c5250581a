// Blocks and segments of the caching allocator (caching_allocator_blocks.h).
#include "device/caching_allocator_blocks.h"

#include "device/caching_allocator_stats.h"

#include <algorithm>
#include <vector>

namespace backplane::npu::caching::detail {
namespace {

constexpr size_t kMinBlockSize = 512;        // every request is rounded up to this
constexpr size_t kSmallSize = 1 << 20;       // requests up to this are "small"
constexpr size_t kSmallSegment = 2 << 20;    // small requests are cut from segments of this size
constexpr size_t kLargeSegment = 20 << 20;   // large requests under kMinLargeAlloc: segments of this
constexpr size_t kMinLargeAlloc = 10 << 20;  // larger ones get a segment of their own,
constexpr size_t kRoundLarge = 2 << 20;      // rounded up to this

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc) return kLargeSegment;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
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

}  // namespace

size_t round_size(size_t bytes) { return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

bool is_whole_segment(const Block* b) { return b->prev == nullptr && b->next == nullptr; }
bool is_free(const Block* b) { return b != nullptr && !b->allocated && b->pending_events == 0; }

Pool& pool_for(Device& d, PrivatePool* owner, size_t size) {
  const bool small = size <= kSmallSize;
  if (owner == nullptr) return small ? d.small : d.large;
  return small ? owner->small : owner->large;
}

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

}  // namespace backplane::npu::caching::detail
