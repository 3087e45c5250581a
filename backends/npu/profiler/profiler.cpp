// The device in torch.profiler: Kineto's child activity profiler API (IActivityProfiler,
// registered with libkineto::api().registerProfilerFactory). PyTorch 2.14 wraps that call
// in REGISTER_PRIVATEUSE1_PROFILER, which 2.11 lacks; calling Kineto directly works on
// both. Kineto opens a session when a profile asks for device kernels (ProfilerActivity.
// PrivateUse1, or CUDA: Kineto's activity types do not tell them apart); the session
// turns recording on for its window, learns from Kineto which op is running on each
// thread (its correlation ids), and hands each kernel the workers timed to Kineto as a
// CONCURRENT_KERNEL on pid = device index, tid = stream id, linked to that op. torch.
// profiler then counts it as the op's device time (key_averages) and export_chrome_trace
// draws it on the stream's row.
// Limits: one session at a time (Kineto runs one); kernels that start before the
// profile starts or end after it stops are left out, as CUPTI does; workers stamp kernels
// on the device's own clock, mapped to host time by offsets sampled as the profile
// starts (clock_map.h) (the profile waits
// for the current device only, torch.npu.synchronize()); a trace holding
// both CUDA and npu kernels puts npu:0 and cuda:0 on the same pid (both use the device
// index, as torch's FunctionEvent.device_index requires).
#include "profiler/profiler.h"

#include "device/c_api.h"
#include "device/kernel_timer.h"
#include "device/npu_stream.h"
#include "profiler/clock_map.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if __has_include(<kineto/libkineto.h>)
#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#define BACKPLANE_NPU_KINETO 1
#else
#define BACKPLANE_NPU_KINETO 0  // a torch built without Kineto: device time is not available
#endif


namespace backplane::npu::profiler {

namespace {

struct Kernel {
  std::string name;
  c10::DeviceIndex device;
  c10::StreamId stream;
  uint64_t op;
  int64_t start_ns;
  int64_t end_ns;
};

// The kernels recorded since the session started. Never destroyed: workers outlive statics.
struct Recorded {
  std::mutex mutex;
  std::vector<Kernel> kernels;
  int64_t since_ns = 0;  // when the session started: a kernel that began before is left out
  ClockMap clocks;       // sampled as the session starts
};
Recorded& recorded() {
  static auto* r = new Recorded();
  return *r;
}
std::atomic<int64_t> g_kernels_recorded{0};  // since load: tests check that nothing is timed while off
std::atomic<uint32_t> g_session{0};        // which session the correlation stacks below belong to

// Kineto's correlation ids of the ops open on this thread, innermost last, each tagged
// with its session: a profile stopped with ops open leaves entries that must not name
// the next profile's ops.
struct OpenOp {
  uint32_t session;
  uint64_t id;
};
thread_local std::vector<OpenOp> t_open_ops;

// The profiler as the device's kernel timer (device/kernel_timer.h), set while a session records.
class WorkerTimer final : public KernelTimer {
 public:
  uint64_t current_op() const override { return profiler::current_op(); }
  int64_t now_ns() const override { return profiler::now_ns(); }
  void record(const std::string& name, c10::DeviceIndex device, c10::StreamId stream, uint64_t op, int64_t start_ns,
              int64_t end_ns) const override {
    record_kernel(name, device, stream, op, start_ns, end_ns);
  }
};
const WorkerTimer* worker_timer() {
  static const auto* timer = new WorkerTimer();  // never destroyed: workers outlive statics
  return timer;
}

void start_recording() {
  std::lock_guard<std::mutex> lock(recorded().mutex);
  recorded().kernels.clear();
  recorded().clocks.sample(device_count(), &host_now_ns);
  recorded().since_ns = host_now_ns();
  set_kernel_timer(worker_timer());
}

std::vector<Kernel> stop_recording() {
  set_kernel_timer(nullptr);
  std::lock_guard<std::mutex> lock(recorded().mutex);
  return std::exchange(recorded().kernels, {});  // a kernel still running is left out of the next (since_ns)
}

}  // namespace

uint64_t current_op() {
  if (t_open_ops.empty() || t_open_ops.back().session != g_session.load(std::memory_order_relaxed)) return 0;
  return t_open_ops.back().id;
}

int64_t host_now_ns() { return c10::getTime(); }

int64_t now_ns() {
  int device = 0;
  int64_t ns = 0;
  npuGetDevice(&device);
  npuDeviceGetTimestamp(device, &ns);  // a current device is always valid
  return ns;
}

void record_kernel(const std::string& name, c10::DeviceIndex device, c10::StreamId stream, uint64_t op,
                   int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(recorded().mutex);
  const std::optional<int64_t> start = recorded().clocks.to_host(device, start_ns);
  const std::optional<int64_t> end = recorded().clocks.to_host(device, end_ns);
  if (!start || !end || *start < recorded().since_ns) return;  // queued and begun in an earlier session
  g_kernels_recorded.fetch_add(1, std::memory_order_relaxed);
  recorded().kernels.push_back(Kernel{name, device, stream, op, *start, *end});
}

namespace {

// The legacy path, torch.autograd.profiler.profile(use_device="npu") without Kineto:
// PyTorch records an event on the current stream as each op begins and as it ends, and
// counts the device time between the two as the op's. With the driver's timing events
// that is the time the stream's worker took from one to the other: the op's kernels,
// and also any wait for the host while the stream was idle (CUDA's legacy path has the
// same limit). The Kineto path below times the kernels themselves.
class EventStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    npuEvent_t e = nullptr;
    check(npuEventCreate(&e, npuEventEnableTiming), "creating a profiler event");
    *event = std::shared_ptr<void>(e, [](void* p) { npuEventDestroy(static_cast<npuEvent_t>(p)); });
    if (cpu_ns != nullptr) *cpu_ns = host_now_ns();
    check(npuEventRecord(e, native(current_stream(index))), "recording a profiler event");
  }

  // Microseconds, as PyTorch's CUDA stubs answer.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto* first = static_cast<npuEvent_t>(start->get());
    auto* second = static_cast<npuEvent_t>(end->get());
    check(npuEventSynchronize(first), "waiting for a profiler event");
    check(npuEventSynchronize(second), "waiting for a profiler event");
    float ms = 0;
    check(npuEventElapsedTime(&ms, first, second), "timing profiler events");
    return ms * 1000.0f;
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = current_device();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      set_device(i);
      op(i);
    }
    set_device(previous);
  }

  // A failure of queued work stays for the program's own next synchronize.
  void synchronize() const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) npuDeviceSynchronize(i);
  }
};

}  // namespace

#if BACKPLANE_NPU_KINETO
namespace {

std::string device_name(c10::DeviceIndex index) { return c10::Device(kNpu, index).str(); }

class KernelSession : public libkineto::IActivityProfilerSession {
 public:
  KernelSession() { g_session.fetch_add(1, std::memory_order_relaxed); }

  void start() override {
    start_recording();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    kernels_ = stop_recording();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  // link(id): the host op Kineto holds under that correlation id.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback link, int64_t,
                    int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, c10::get_privateuse1_backend() + " kernels");
    for (const Kernel& k : kernels_) {
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL, k.name);
      libkineto::GenericTraceActivity& act = *buffer_->activities.back();
      act.startTime = k.start_ns;
      act.endTime = k.end_ns;
      act.device = k.device;
      act.resource = k.stream;
      act.id = static_cast<int32_t>(k.op);
      act.linked = k.op != 0 ? link(static_cast<int32_t>(k.op)) : nullptr;
      // Quoted: addMetadata formats with fmt, whose compiled part libtorch does not export.
      act.addMetadataQuoted("device", std::to_string(k.device));
      act.addMetadataQuoted("stream", std::to_string(k.stream));
      act.log(logger);
    }
    // Every device's row but the first is named here; the first is getDeviceInfo's,
    // which Kineto also reads to leave out its default "GPU n" names.
    const std::vector<c10::DeviceIndex> seen = devices();
    for (size_t i = 1; i < seen.size(); ++i) logger.handleDeviceInfo(device_info(seen[i]), 0);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (kernels_.empty()) return nullptr;  // nothing on the device: Kineto's own rows stay as they are
    return std::make_unique<libkineto::DeviceInfo>(device_info(devices().front()));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<c10::DeviceIndex, c10::StreamId>> streams;
    for (const Kernel& k : kernels_) streams.emplace(k.device, k.stream);
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : streams) {
      const std::string name = stream == 0 ? "stream 0 (default)" : "stream " + std::to_string(stream);
      infos.push_back(resource_info(device, stream, name));
    }
    return infos;
  }

  // The activities logged above live in this buffer, which Kineto keeps with the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override {
    t_open_ops.push_back(OpenOp{g_session.load(std::memory_order_relaxed), id});
  }

  void popCorrelationId() override {
    if (!t_open_ops.empty()) t_open_ops.pop_back();
  }

 private:
  std::vector<c10::DeviceIndex> devices() const {
    std::vector<c10::DeviceIndex> out;
    for (const Kernel& k : kernels_) out.push_back(k.device);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Kineto 2.11's ResourceInfo has a constructor (deviceId, id, sortIndex, name); later
  // ones are aggregates in member order (id, sortIndex, deviceId, name). The same braces
  // would compile for both and swap the fields for one. A template, so that the branch
  // not taken is never instantiated (clang checks it otherwise).
  template <typename Info = libkineto::ResourceInfo>
  static Info resource_info(int64_t device, int64_t stream, const std::string& name) {
    if constexpr (std::is_aggregate_v<Info>) {
      return Info{stream, stream, device, name};
    } else {
      return Info(device, stream, stream, name);
    }
  }

  static libkineto::DeviceInfo device_info(c10::DeviceIndex index) {
    // Below the host's rows, as Kineto places GPUs.
    return libkineto::DeviceInfo{index, libkineto::kExceedMaxPid + index, device_name(index), device_name(index)};
  }

  std::vector<Kernel> kernels_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class KernelProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.contains(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;  // a host-only profile
    return std::make_unique<KernelSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = c10::get_privateuse1_backend() + " stream workers";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

}  // namespace
#endif  // BACKPLANE_NPU_KINETO

}  // namespace backplane::npu::profiler

// Hands PyTorch the legacy event stubs and Kineto the kernel timer. 1 when Kineto takes
// the device's kernels, 0 when this torch has no Kineto. Called once by the Python
// module at load (again is harmless): both keep what they are given for every later
// profile.
BACKPLANE_NPU_C_API int backplane_npu_profiler_register() {
  static const bool registered = [] {
    static backplane::npu::profiler::EventStubs stubs;  // PyTorch keeps the pointer
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
#if BACKPLANE_NPU_KINETO
    libkineto::api().registerProfilerFactory(
        [] { return std::make_unique<backplane::npu::profiler::KernelProfiler>(); });
    return true;
#else
    return false;
#endif
  }();
  return registered ? 1 : 0;
}

// Kernels timed since the plugin loaded: unchanged while no profile records the device.
BACKPLANE_NPU_C_API int64_t backplane_npu_profiler_kernels_recorded() {
  return backplane::npu::profiler::g_kernels_recorded.load(std::memory_order_relaxed);
}

// The device's own clock now (npuDeviceGetTimestamp), in *ns: what kernels are stamped with
// before the profiler maps them to host time. Tests only.
BACKPLANE_NPU_C_API int backplane_npu_profiler_device_clock(int device, int64_t* ns, char* message, size_t size) {
  return backplane::npu::guarded(message, size, [&] {
    backplane::npu::check(npuDeviceGetTimestamp(backplane::npu::device_index(device), ns), "reading the device clock");
  });
}
