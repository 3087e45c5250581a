// Private pools of the caching allocator, for graph capture (caching_allocator_pools.h).
#include "device/caching_allocator_pools.h"

#include "device/caching_allocator.h"
#include "device/caching_allocator_blocks.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <sstream>

namespace backplane::npu::caching {
namespace detail {

PrivatePool* routed_pool(Device& d, c10::Stream stream) {
  for (auto it = d.routes.rbegin(); it != d.routes.rend(); ++it)
    if (it->filter(stream)) return d.pools.at(it->pool).get();
  return nullptr;
}

bool is_general(c10::MempoolId_t id) { return id.first == 0 && id.second == 0; }

std::string pool_id_text(c10::MempoolId_t id) {
  std::ostringstream out;  // not string operator+: GCC 12 warns falsely (-Wstringop-overflow) on that
  out << "(" << id.first << ", " << id.second << ")";
  return out.str();
}

}  // namespace detail

using namespace detail;

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
