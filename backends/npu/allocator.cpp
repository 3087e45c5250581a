#include "allocator.h"

#include "launch.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace backplane::npu {
namespace {

void free_device(void* ptr) { npuFree(ptr); }  // may run on a stream's worker: the last user of a tensor
void free_host(void* ptr) { npuFreeHost(ptr); }

struct DeviceAllocator final : c10::Allocator {
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

REGISTER_ALLOCATOR(kNpu, &g_device_allocator);

}  // namespace backplane::npu
