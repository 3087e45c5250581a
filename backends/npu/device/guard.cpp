// The device guard: current device, streams and events for c10 (DeviceGuard,
// StreamGuard, torch.Stream, torch.Event, torch.accelerator all come here).
#include "device/launch.h"
#include "device/npu_stream.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace backplane::npu {
namespace {

npuEvent_t as_event(void* event) { return static_cast<npuEvent_t>(event); }

struct NpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device previous = getDevice();
    setDevice(d);
    return previous;
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, current_device()); }
  void setDevice(c10::Device d) const override { set_device(index_of(d)); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { npuSetDevice(d.index()); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
#if __has_include(<c10/core/DeviceCapability.h>)
  // torch.accelerator.get_device_capability. The emulated device keeps tensors of every
  // dtype in host memory and converts between them through the CPU fallback, so every
  // scalar type is supported (DeviceCapability's default). A vendor clears the bits of the
  // dtypes its memory or copy engine cannot hold.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_index(index_of(d));
    return c10::DeviceCapability();
  }
#endif

  // c10 declares getStream and exchangeStream noexcept: a check that throws there
  // ends the process. On a bad device index or stream id they hand back a stream
  // that native() refuses, with the index and the valid range, wherever it is used;
  // torch.npu checks indices before it gets here.
  c10::Stream getStream(c10::Device d) const noexcept override {
    try {
      return current_stream(d.has_index() ? d.index() : current_device());
    } catch (...) {
      return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, d.has_index() ? d.index() : 0), 0);
    }
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(index_of(d)); }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override { return pool_stream(index_of(d)); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return pool_stream(index_of(d));
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    try {
      return exchange_stream(s);
    } catch (...) {
      return s;  // a bad device index: nothing changed, and using s raises
    }
  }
  bool queryStream(const c10::Stream& s) const override { return npuStreamQuery(native(s)) == npuSuccess; }
  void synchronizeStream(const c10::Stream& s) const override { synchronize(s); }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    for (c10::StreamId id = 0; id <= kPoolSize; ++id)
      synchronize(c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, index), id));
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "backplane npu: event of npu:",
                int(device_index), " cannot be recorded on a stream of ", stream.device());
    if (*event == nullptr) {
      npuEvent_t created = nullptr;
      const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? npuEventEnableTiming : npuEventDefault;
      check(npuEventCreate(&created, flags), "creating an event");
      *event = created;
    }
    check(npuEventRecord(as_event(*event), native(stream)), "recording an event");
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) check(npuStreamWaitEvent(native(stream), as_event(event)), "waiting for an event");
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || npuEventQuery(as_event(event)) == npuSuccess;
  }
  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    check(npuEventSynchronize(as_event(event)), "synchronizing an event");
    release_finished_work();
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    npuEventDestroy(as_event(event));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "backplane npu: elapsed_time needs both events recorded; one was never recorded");
    float ms = 0;
    const npuError_t status = npuEventElapsedTime(&ms, as_event(start), as_event(end));
    TORCH_CHECK(status != npuErrorNotReady,
                "backplane npu: elapsed_time: an event has not completed yet; synchronize it first");
    TORCH_CHECK(status == npuSuccess,
                "backplane npu: elapsed_time needs both events created with enable_timing=True and recorded");
    return ms;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

}  // namespace backplane::npu
