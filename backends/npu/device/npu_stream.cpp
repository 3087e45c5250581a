#include "device/npu_stream.h"

#include "device/launch.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace backplane::npu {
namespace {

struct DeviceStreams {
  std::once_flag created;
  std::array<npuStream_t, kPoolSize + 1> streams{};  // [0]: default
  std::atomic<unsigned> next{0};
};

DeviceStreams& streams_of(c10::DeviceIndex index) {
  static auto* all = new std::vector<DeviceStreams>(device_count());  // never destroyed: workers outlive statics
  check_index(index);
  DeviceStreams& d = (*all)[index];
  std::call_once(d.created, [&] {
    for (auto& s : d.streams) check(npuStreamCreate(&s, index), "creating a stream");
  });
  return d;
}

// The current stream id of each device, for this thread.
std::vector<c10::StreamId>& current_ids() {
  thread_local std::vector<c10::StreamId> ids(device_count(), 0);
  return ids;
}

}  // namespace

void check(npuError_t status, const char* what) {
  TORCH_CHECK(status == npuSuccess, "backplane npu: ", what, " failed: ", npuGetErrorString(status));
}

c10::DeviceIndex device_count() {
  int n = 0;
  return npuGetDeviceCount(&n) == npuSuccess ? static_cast<c10::DeviceIndex>(n) : 0;
}

c10::DeviceIndex current_device() {
  int d = 0;
  check(npuGetDevice(&d), "getting the current device");
  return static_cast<c10::DeviceIndex>(d);
}

void check_config() {
  const char* error = npuGetConfigError();
  TORCH_CHECK(error == nullptr, "backplane npu: ", error);
}

void check_index(c10::DeviceIndex index) {
  check_config();
  TORCH_CHECK(index >= 0 && index < device_count(), "backplane npu: device index ", int(index),
              " out of range; expected 0 <= index < ", int(device_count()));
}

void set_device(c10::DeviceIndex index) {
  check_index(index);
  check(npuSetDevice(index), "setting the current device");
}

c10::DeviceIndex index_of(c10::Device device) {
  TORCH_CHECK(device.type() == kNpu, "backplane npu: expected an npu device, got ", device);
  return device.has_index() ? device.index() : current_device();
}

npuStream_t native(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNpu, "backplane npu: expected an npu stream, got one on ", stream.device());
  const c10::StreamId id = stream.id();
  TORCH_CHECK(id >= 0 && id <= kPoolSize, "backplane npu: unknown stream id ", id, "; expected 0 to ", kPoolSize);
  return streams_of(stream.device_index()).streams[id];
}

c10::Stream default_stream(c10::DeviceIndex index) {
  streams_of(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, index), 0);
}

c10::Stream current_stream(c10::DeviceIndex index) {
  streams_of(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, index), current_ids()[index]);
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  // The id is checked by native() where the stream is used: c10 calls this from a
  // noexcept function, so a bad id must not throw here (guard.cpp).
  const c10::Stream previous = current_stream(stream.device_index());
  current_ids()[stream.device_index()] = stream.id();
  return previous;
}

c10::Stream pool_stream(c10::DeviceIndex index) {
  const unsigned n = streams_of(index).next.fetch_add(1);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, index), 1 + static_cast<c10::StreamId>(n % kPoolSize));
}

void synchronize(const c10::Stream& stream) {
  npuStream_t s = native(stream);
  const npuError_t status = npuStreamSynchronize(s);
  release_finished_work();
  if (status == npuSuccess) return;
  TORCH_CHECK(status != npuErrorStreamCaptureUnsupported, "backplane npu: waiting for ", stream.device(), " stream ",
              stream.id(), " while it captures a graph is refused: a host read (.item(), .cpu(), print) or "
              "synchronize of captured work cannot wait for work that has not run; move it out of the capture "
              "(the capture is spoilt and ends with an error)");
  char message[1024];
  npuStreamGetError(s, message, sizeof message);
  TORCH_CHECK(false, "backplane npu: work queued on ", stream.device(), " stream ", stream.id(), " failed: ", message);
}

}  // namespace backplane::npu
