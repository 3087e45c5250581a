// The caching allocator's state (caching_allocator.h has the contract): blocks cut from
// driver segments, the pools that keep the free ones, and per device its segments,
// private pools, routes and statistics. One State for the process, under one mutex: simpler
// than CUDA's lock per device, and uncontended in practice (a stream worker never
// allocates). The mutex is never held while waiting for a stream.
// Internal to the allocator's files (caching_allocator*.cpp); the functions declared
// beside these structures run under the mutex unless they say otherwise.
#pragma once

#include "device/npu_stream.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane::npu::caching::detail {

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
  c10::CachingDeviceAllocator::DeviceStats stats;
};

struct State {
  std::mutex mutex;
  std::vector<Device> devices = std::vector<Device>(static_cast<size_t>(std::max<int>(0, device_count())));
  std::unordered_map<void*, Block*> allocated;  // by pointer handed out
  std::deque<std::pair<npuEvent_t, Block*>> pending;  // events of blocks freed after record_stream
};

// The process's state (caching_allocator.cpp); never destroyed: tensors may outlive statics.
State& state();

}  // namespace backplane::npu::caching::detail
