#include "call_overhead.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <benchmark/benchmark.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <functional>

namespace backplane::bench {
namespace {

// A call costs about a microsecond: a tenth of a second is 1e5 calls, plenty for a median.
constexpr double kMinSeconds = 0.1;

using AddSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);

void time_host_calls(benchmark::State& state, c10::Device device, const std::function<at::Tensor()>& call) {
  const c10::DeviceGuard guard(device);
  auto sync = [&] {
    if (device.is_cpu()) return;
    const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
    impl->synchronizeStream(impl->getStream(device));
  };
  for (int i = 0; i < 100; ++i) benchmark::DoNotOptimize(call());
  sync();
  for (auto _ : state) benchmark::DoNotOptimize(call());
  sync();  // after the timed loop: drains the queue, not counted
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void register_call_overhead(const SelectedBackend& backend) {
  const c10::Device device = backend.device;
  const std::string prefix = "call_overhead_add/" + backend.name + "/";
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  if (backend.ops.count("add")) {
    benchmark::RegisterBenchmark((prefix + "backplane/1").c_str(), [device, opts](benchmark::State& state) {
      // The typed handle is looked up once, as a caller would keep it.
      static const auto op =
          c10::Dispatcher::singleton().findSchemaOrThrow("backplane::add", "").typed<AddSignature>();
      const at::Tensor a = at::randn({1}, opts), b = at::randn({1}, opts);
      time_host_calls(state, device, [&] { return op.call(a, b, 1); });
      state.SetLabel("float32[1] backplane::add through the dispatcher");
    })->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(kMinSeconds);
  }
  benchmark::RegisterBenchmark((prefix + "torch/1").c_str(), [device, opts](benchmark::State& state) {
    const at::Tensor a = at::randn({1}, opts), b = at::randn({1}, opts);
    time_host_calls(state, device, [&] { return at::add(a, b); });
    state.SetLabel("float32[1] at::add");
  })->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(kMinSeconds);
}

}  // namespace backplane::bench
