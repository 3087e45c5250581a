#include "device/allocator.h"

#include "device/caching_allocator.h"
#include "device/host_caching_allocator.h"
#include "device/launch.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstring>

namespace backplane::npu {
namespace {

void free_device(void* ptr) { caching::free(ptr); }  // any thread, any time (deleters cannot raise)

// A c10::DeviceAllocator, the type torch.accelerator's memory API asks the device's
// registered allocator to be (c10::getDeviceAllocator): memory_allocated, memory_stats,
// reset_peak_memory_stats, empty_cache, get_memory_info all come here.
struct DeviceAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex index = current_device();
    void* ptr = caching::allocate(index, bytes);
    return {ptr, ptr, &free_device, c10::Device(kNpu, index)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device; }
  // Device to device, in stream order on the current stream, then waits (the caller
  // expects the bytes to be there on return).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) return;
    const ReleaseDeferred inside_c10;  // c10's copy-on-write holds a storage lock here
    const c10::Stream stream = current_stream(current_device());
    launch_on(stream, "copying device memory",
              [=] { std::memcpy(npuDevicePtrToHost(dest), npuDevicePtrToHost(src), count); });
    synchronize(stream);
  }

  bool initialized() override { return true; }  // the driver needs no set-up before the first allocation
  // Every device for the general pool (as CUDA's), the current device for a private pool.
  void emptyCache(c10::MempoolId_t mempool_id) override {
    release_finished_work();  // finished work may hold the last reference to a block
    if (mempool_id != c10::MempoolId_t{0, 0}) return caching::empty_cache(current_device(), mempool_id);
    for (c10::DeviceIndex index = 0; index < device_count(); ++index) caching::empty_cache(index);
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { caching::record_stream(ptr.get(), stream); }

  // Read after finished work is released, so memory it held counts as freed as soon as
  // the host sees the work done.
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    check_index(index);
    release_finished_work();
    return caching::stats(index);
  }
  void resetAccumulatedStats(c10::DeviceIndex index) override {
    check_index(index);
    caching::reset_accumulated_stats(index);
  }
  void resetPeakStats(c10::DeviceIndex index) override {
    check_index(index);
    caching::reset_peak_stats(index);
  }
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 9  // torch.accelerator.get_memory_info
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    check_index(index);
    size_t free_bytes = 0, total_bytes = 0;
    check(npuMemGetInfo(index, &free_bytes, &total_bytes), "reading the device's free memory");
    return {free_bytes, total_bytes};
  }
#endif
};

DeviceAllocator g_device_allocator;

}  // namespace

c10::Allocator* device_allocator() { return &g_device_allocator; }
c10::Allocator* host_allocator() { return host_caching_allocator(); }

// torch.empty(..., device="npu") and c10::getDeviceAllocator(PrivateUse1) find it here.
REGISTER_ALLOCATOR(kNpu, &g_device_allocator);

}  // namespace backplane::npu
