// The C functions behind torch.npu's memory API (python/backplane_npu/_memory.py): the
// caching allocator's statistics, snapshot and cache, the driver's free memory, the pinned
// host cache, and private pools (for tests: graph capture calls caching_allocator.h).
#include "device/c_api.h"
#include "device/caching_allocator.h"
#include "device/host_caching_allocator.h"
#include "device/launch.h"
#include "device/npu_stream.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

namespace {

using backplane::npu::device_index;
using backplane::npu::guarded;

// The statistics under torch.cuda.memory_stats()'s flat key names ("allocated_bytes.all.current").
std::string stats_json(const c10::CachingDeviceAllocator::DeviceStats& s) {
  std::ostringstream out;
  const std::pair<const char*, const c10::CachingAllocator::StatArray*> arrays[] = {
      {"allocation", &s.allocation},         {"segment", &s.segment},
      {"active", &s.active},                 {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes}, {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},     {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes}};
  const char* pools[] = {"all", "small_pool", "large_pool"};
  const auto stat = [&](const std::string& name, const c10::CachingAllocator::Stat& v) {
    out << "\"" << name << ".current\": " << v.current << ", \"" << name << ".peak\": " << v.peak << ", \"" << name
        << ".allocated\": " << v.allocated << ", \"" << name << ".freed\": " << v.freed << ", ";
  };
  out << "{";
  for (const auto& [name, array] : arrays)
    for (size_t pool = 0; pool < 3; ++pool) stat(std::string(name) + "." + pools[pool], (*array)[pool]);
  stat("oversize_allocations", s.oversize_allocations);
  stat("oversize_segments", s.oversize_segments);
  out << "\"num_alloc_retries\": " << s.num_alloc_retries << ", \"num_ooms\": " << s.num_ooms
      << ", \"num_sync_all_streams\": " << s.num_sync_all_streams << ", \"num_device_alloc\": " << s.num_device_alloc
      << ", \"num_device_free\": " << s.num_device_free << ", \"max_split_size\": " << s.max_split_size << "}";
  return out.str();
}

// Copies text into out (size bytes) and its length, terminator included, into *needed: a
// caller with too small a buffer asks again with *needed.
void give_text(const std::string& text, char* out, size_t size, size_t* needed) {
  *needed = text.size() + 1;
  if (size >= *needed) std::memcpy(out, text.c_str(), *needed);
}

c10::CachingDeviceAllocator::DeviceStats stats_of(int device) {
  const c10::DeviceIndex index = device_index(device);
  backplane::npu::release_finished_work();  // what finished work held counts as freed
  return backplane::npu::caching::stats(index);
}

}  // namespace

// out[0]: bytes allocated now, out[1]: their peak since start or reset, out[2]: live allocations.
BACKPLANE_NPU_C_API int backplane_npu_memory_stats(int device, int64_t* out, char* message, size_t size) {
  return guarded(message, size, [&] {
    const auto stats = stats_of(device);
    out[0] = stats.allocated_bytes[0].current;
    out[1] = stats.allocated_bytes[0].peak;
    out[2] = stats.allocation[0].current;
  });
}

BACKPLANE_NPU_C_API int backplane_npu_memory_stats_json(int device, char* out, size_t out_size, size_t* needed,
                                                        char* message, size_t size) {
  return guarded(message, size, [&] { give_text(stats_json(stats_of(device)), out, out_size, needed); });
}

BACKPLANE_NPU_C_API int backplane_npu_memory_snapshot(int device, char* out, size_t out_size, size_t* needed,
                                                      char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::DeviceIndex index = device_index(device);
    backplane::npu::release_finished_work();
    give_text(backplane::npu::caching::snapshot_json(index), out, out_size, needed);
  });
}

BACKPLANE_NPU_C_API int backplane_npu_reset_peak(int device, char* message, size_t size) {
  return guarded(message, size, [&] { backplane::npu::caching::reset_peak_stats(device_index(device)); });
}

BACKPLANE_NPU_C_API int backplane_npu_reset_accumulated(int device, char* message, size_t size) {
  return guarded(message, size, [&] { backplane::npu::caching::reset_accumulated_stats(device_index(device)); });
}

BACKPLANE_NPU_C_API int backplane_npu_empty_cache(int device, char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::DeviceIndex index = device_index(device);
    backplane::npu::release_finished_work();
    backplane::npu::caching::empty_cache(index);
  });
}

// out[0]: free bytes, out[1]: the device's capacity (runtime/npu_runtime.h: npuMemGetInfo).
BACKPLANE_NPU_C_API int backplane_npu_mem_get_info(int device, int64_t* out, char* message, size_t size) {
  return guarded(message, size, [&] {
    size_t free_bytes = 0, total_bytes = 0;
    backplane::npu::check(npuMemGetInfo(device_index(device), &free_bytes, &total_bytes),
                          "reading the device's free memory");
    out[0] = static_cast<int64_t>(free_bytes);
    out[1] = static_cast<int64_t>(total_bytes);
  });
}

// out: allocated bytes, reserved bytes, live allocations of pinned host memory.
BACKPLANE_NPU_C_API void backplane_npu_host_memory_stats(int64_t* out) {
  const backplane::npu::HostCacheStats stats = backplane::npu::host_cache_stats();
  out[0] = stats.allocated_bytes;
  out[1] = stats.reserved_bytes;
  out[2] = stats.allocations;
}

BACKPLANE_NPU_C_API void backplane_npu_empty_host_cache() { backplane::npu::empty_host_cache(); }

// Private pools: allocations on the stream (device, stream_id) go to pool (first, second).
BACKPLANE_NPU_C_API int backplane_npu_begin_allocate_to_pool(int device, uint64_t first, uint64_t second,
                                                             int64_t stream_id, char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::DeviceIndex index = device_index(device);
    backplane::npu::caching::begin_allocate_to_pool(
        index, {first, second}, [index, stream_id](c10::Stream s) { return s.device_index() == index && s.id() == stream_id; });
  });
}

BACKPLANE_NPU_C_API int backplane_npu_end_allocate_to_pool(int device, uint64_t first, uint64_t second, char* message,
                                                           size_t size) {
  return guarded(message, size, [&] { backplane::npu::caching::end_allocate_to_pool(device_index(device), {first, second}); });
}

BACKPLANE_NPU_C_API int backplane_npu_release_pool(int device, uint64_t first, uint64_t second, char* message,
                                                   size_t size) {
  return guarded(message, size, [&] { backplane::npu::caching::release_pool(device_index(device), {first, second}); });
}

BACKPLANE_NPU_C_API void backplane_npu_new_pool_id(uint64_t* out) {
  const c10::MempoolId_t id = backplane::npu::caching::new_pool_id();
  out[0] = id.first;
  out[1] = id.second;
}
