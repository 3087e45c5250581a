// What PyTorch asks of a PrivateUse1 backend beyond the dispatcher: the device name
// ("npu"), the hooks (availability, device queries, generators, pinned memory,
// storage resize from Python). Registered when the plugin is opened.
#include "device/allocator.h"
#include "aten/storage.h"
#include "device/generator.h"
#include "device/npu_stream.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/util/Exception.h>

#include <cstdio>

namespace backplane::npu {
namespace {

struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex /*index*/) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    const c10::DeviceIndex previous = current_device();
    set_device(index);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return index >= 0 && index < device_count() ? exchangeDevice(index) : current_device();
  }

  // Generators: generator.h (one default per device, apart from the CPU's).
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override { return default_generator(index); }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }

  bool isPinnedPtr(const void* data) const override {
    npuPointerAttributes attributes{};
    return npuPointerGetAttributes(&attributes, data) == npuSuccess && attributes.type == npuMemoryTypeHost;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }
  at::Device getDeviceFromPtr(void* data) const override {
    npuPointerAttributes attributes{};
    check(npuPointerGetAttributes(&attributes, data), "looking up a pointer");
    TORCH_CHECK(attributes.type == npuMemoryTypeDevice, "backplane npu: pointer ", data,
                " is not npu device memory");
    return at::Device(kNpu, static_cast<c10::DeviceIndex>(attributes.device));
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t bytes) const override {
    resize_bytes(storage.unsafeGetStorageImpl(), bytes);
  }
};

// Runs while the plugin is opened. PyTorch allows one PrivateUse1 backend per
// process: if another registered first, say so rather than terminate the process
// from a static initializer.
const bool registered = [] {
  try {
    c10::register_privateuse1_backend("npu");
    static NpuHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane npu: cannot register the npu device: %s\n", e.what());
  }
  return true;
}();

}  // namespace
}  // namespace backplane::npu
