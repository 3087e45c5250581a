#include "device/host_caching_allocator.h"

#include "runtime/npu_runtime.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace backplane::npu {
namespace {

constexpr size_t kMinHostBlock = 512;

size_t size_class(size_t bytes) {
  size_t size = kMinHostBlock;
  while (size < bytes) size <<= 1;
  return size;
}

struct HostCache {
  std::mutex mutex;
  std::unordered_map<void*, size_t> in_use;        // pointer -> its size class
  std::map<size_t, std::vector<void*>> free_blocks;  // size class -> cached blocks
  HostCacheStats stats{0, 0, 0};
};

HostCache& cache() {
  static auto* instance = new HostCache();  // never destroyed: tensors may outlive statics
  return *instance;
}

// Returns the cached blocks to the driver. Under the mutex.
void release_cached(HostCache& c) {
  for (auto& [size, blocks] : c.free_blocks) {
    for (void* ptr : blocks) npuFreeHost(ptr);
    c.stats.reserved_bytes -= static_cast<int64_t>(size * blocks.size());
    blocks.clear();
  }
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  HostCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.in_use.find(ptr);
  if (it == c.in_use.end()) return;  // not ours (a deleter cannot raise)
  c.free_blocks[it->second].push_back(ptr);
  c.stats.allocated_bytes -= static_cast<int64_t>(it->second);
  c.stats.allocations -= 1;
  c.in_use.erase(it);
}

struct HostCachingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU)};
    const size_t size = size_class(bytes);
    HostCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    void* ptr = nullptr;
    auto& cached = c.free_blocks[size];
    if (!cached.empty()) {
      ptr = cached.back();
      cached.pop_back();
    } else {
      npuError_t status = npuMallocHost(&ptr, size);
      if (status != npuSuccess) {  // retry once with the cache given back
        release_cached(c);
        status = npuMallocHost(&ptr, size);
      }
      TORCH_CHECK_WITH(OutOfMemoryError, status == npuSuccess, "backplane npu: allocating ", bytes,
                       " bytes of pinned host memory failed: ", npuGetErrorString(status), "; ",
                       c.stats.allocated_bytes, " bytes of pinned memory are in use by tensors (the cached, unused "
                       "blocks were returned to the driver before this error)");
      c.stats.reserved_bytes += static_cast<int64_t>(size);
    }
    c.in_use[ptr] = size;
    c.stats.allocated_bytes += static_cast<int64_t>(size);
    c.stats.allocations += 1;
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostCachingAllocator g_host_caching_allocator;

}  // namespace

c10::Allocator* host_caching_allocator() { return &g_host_caching_allocator; }

HostCacheStats host_cache_stats() {
  HostCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void empty_host_cache() {
  HostCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  release_cached(c);
}

}  // namespace backplane::npu
