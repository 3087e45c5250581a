#include "call_overhead.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <benchmark/benchmark.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <backplane/selection.h>

#include <functional>
#include <utility>

namespace backplane::bench {
namespace {

// A call costs about a microsecond: a tenth of a second is 1e5 calls, plenty for a median.
constexpr double kMinSeconds = 0.1;

using AddSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using MulSignature = at::Tensor(const at::Tensor&, const at::Tensor&);

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
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const std::string plugin = backend.name;
  // add (every full-ABI plugin of Backplane's serves it) and mul (a stable-ABI plugin, whose
  // interface carries no Scalar, serves mul, not add): the same op side by side on each backend.
  const std::pair<const char*, std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>> ops[] = {
      {"add", [](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }},
      {"mul", [](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); }},
  };
  for (const auto& entry : ops) {  // no structured binding: clang before 16 cannot capture one
    const std::string name = entry.first;
    const auto torch_op = entry.second;
    if (!backend.ops.count(name)) continue;
    const std::string prefix = "call_overhead_" + name + "/" + backend.name + "/";
    benchmark::RegisterBenchmark((prefix + "backplane/1").c_str(), [device, opts, plugin, name](benchmark::State& state) {
      // This row times its own plugin where another serves the op on the same device.
      const ScopedPreference hold(name, {plugin});
      // The handle is looked up once, as a caller would keep it.
      const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(("backplane::" + name).c_str(), "");
      const at::Tensor a = at::randn({1}, opts), b = at::randn({1}, opts);
      if (name == "add") {
        const auto typed = handle.typed<AddSignature>();
        time_host_calls(state, device, [&] { return typed.call(a, b, 1); });
      } else {
        const auto typed = handle.typed<MulSignature>();
        time_host_calls(state, device, [&] { return typed.call(a, b); });
      }
      state.SetLabel("float32[1] backplane::" + name + " through the dispatcher");
    })->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(kMinSeconds);
    benchmark::RegisterBenchmark((prefix + "torch/1").c_str(), [device, opts, name, torch_op](benchmark::State& state) {
      const at::Tensor a = at::randn({1}, opts), b = at::randn({1}, opts);
      time_host_calls(state, device, [&] { return torch_op(a, b); });
      state.SetLabel("float32[1] at::" + name);
    })->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(kMinSeconds);
  }
}

}  // namespace backplane::bench
