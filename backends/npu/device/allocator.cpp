#include "device/allocator.h"

#include "device/launch.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace backplane::npu {
namespace {

void free_device(void* ptr) { npuFree(ptr); }  // may run on a stream's worker: the last user of a tensor
void free_host(void* ptr) { npuFreeHost(ptr); }

// A c10::DeviceAllocator, the type torch.accelerator's memory API asks the device's
// registered allocator to be (c10::getDeviceAllocator): memory_allocated, memory_stats,
// reset_peak_memory_stats, empty_cache. Statistics are the driver's (memory_stats below).
struct DeviceAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex index = current_device();
    void* ptr = nullptr;
    const npuError_t status = npuMalloc(&ptr, bytes, index);
    TORCH_CHECK_WITH(OutOfMemoryError, status == npuSuccess, "backplane npu: allocating ", bytes, " bytes on npu:",
                     int(index), " failed: ", npuGetErrorString(status));
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
  // No cache to empty: each free returns its memory to the driver at once. A caching
  // allocator releases its unused blocks here.
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {}
  // Nothing to record: with no cache, memory goes back only when its last tensor is
  // dropped, and queued work holds the tensors it uses until it has run (launch.h). A
  // caching allocator must not reuse a block before the recorded streams' work is done.
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  // Without a cache every allocation is its own segment, so reserved memory is the
  // allocated memory and segments are allocations. The driver counts bytes now and at
  // the peak, and live allocations; the rest (totals allocated and freed, the peak count
  // of allocations, the small and large pools) reads 0.
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    const npuMemStats driver = memory_stats(index);
    c10::CachingDeviceAllocator::DeviceStats stats;
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    for (auto* bytes : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes}) {
      (*bytes)[all].current = driver.allocated_bytes;
      (*bytes)[all].peak = driver.peak_bytes;
    }
    for (auto* count : {&stats.allocation, &stats.segment, &stats.active}) (*count)[all].current = driver.allocations;
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex index) override { check_index(index); }  // no totals are kept
  void resetPeakStats(c10::DeviceIndex index) override {
    check_index(index);
    check(npuMemResetPeak(index), "resetting peak memory");
  }
};

struct HostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t bytes) override {
    void* ptr = nullptr;
    const npuError_t status = npuMallocHost(&ptr, bytes);
    TORCH_CHECK_WITH(OutOfMemoryError, status == npuSuccess, "backplane npu: allocating ", bytes,
                     " bytes of pinned host memory failed: ", npuGetErrorString(status));
    return {ptr, ptr, &free_host, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_host; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

DeviceAllocator g_device_allocator;
HostAllocator g_host_allocator;

}  // namespace

c10::Allocator* device_allocator() { return &g_device_allocator; }
c10::Allocator* host_allocator() { return &g_host_allocator; }

npuMemStats memory_stats(c10::DeviceIndex index) {
  check_index(index);
  release_finished_work();
  npuMemStats stats{};
  check(npuMemGetStats(index, &stats), "reading memory statistics");
  return stats;
}

// torch.empty(..., device="npu") and c10::getDeviceAllocator(PrivateUse1) find it here.
REGISTER_ALLOCATOR(kNpu, &g_device_allocator);

}  // namespace backplane::npu
