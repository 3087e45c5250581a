// aten ops without an npu kernel run on the CPU: inputs copied to the host, the CPU
// kernel, results copied back (at::native::cpu_fallback). It warns once per op, so a
// model's missing kernels show up in its log. Refused, with NotImplementedError:
// - ops that return a view: a CPU copy would not alias the npu tensor;
// - matrix products and convolutions (kMustRunOnDevice): the hot path of real
//   models; a silent round trip through the host would hide a missing kernel (mm,
//   bmm, addmm and baddbmm have npu kernels, matmul.cpp; their other overloads and
//   the convolutions do not);
// - ops outside aten: Backplane never computes its own ops on another device
//   (a missing backplane kernel is an error that names the op and the backend);
// - random ops without a Generator argument (native_dropout has an npu kernel,
//   aten/dropout.cpp): on the host they would draw from the CPU's generator.
// Random ops draw from the npu's generators (generator.h): each Generator? argument is
// replaced by the CPU generator that holds the npu generator's state (none: the default
// generator of the op's device), which the CPU kernel locks while it draws. The
// fallback runs on the calling thread, inputs copied to the host first, so draws happen
// in program order.
#include "device/generator.h"
#include "device/npu_graph.h"
#include "device/npu_stream.h"
#include "ops.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace backplane::npu {
namespace {

const std::set<std::string> kMustRunOnDevice = {
    "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::convolution", "aten::_convolution",
    "aten::convolution_overrideable",
};

bool returns_view(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns())
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return true;
  return false;
}

// The CPU kernel would happily take tensors from several devices once they are all
// copied to the host; CUDA refuses that, and so does the npu. CPU scalars (0-dim)
// are allowed, as on CUDA. Returns the device (none: no tensor but CPU scalars).
std::optional<c10::Device> check_one_device(const std::string& op, c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return;
    if (!device) device = t.device();
    TORCH_CHECK(t.device() == *device, "backplane npu: ", op, " got tensors on ", *device, " and ", t.device(),
                "; expected them all on one npu device (0-dim CPU tensors excepted)");
  };
  for (const c10::IValue& arg : args) {
    if (arg.isTensor()) visit(arg.toTensor());
    if (arg.isList())
      for (const c10::IValue& item : arg.toListRef())
        if (item.isTensor()) visit(item.toTensor());
  }
  return device;
}

bool is_generator(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::GeneratorType::Kind) return true;
  const auto* optional = type->castRaw<c10::OptionalType>();
  return optional != nullptr && optional->getElementType()->kind() == c10::GeneratorType::Kind;
}

// The npu device whose default generator serves a Generator? argument left None: the
// tensors' device, else a Device argument's, else the current device.
c10::Device op_device(std::optional<c10::Device> tensors, c10::ArrayRef<c10::IValue> args) {
  if (tensors && tensors->type() == kNpu) return *tensors;
  for (const c10::IValue& arg : args)
    if (arg.isDevice() && arg.toDevice().type() == kNpu) return arg.toDevice();
  return c10::Device(kNpu, current_device());
}

// Replaces each Generator? argument on the stack by the CPU generator the CPU kernel
// draws from (generator.h: host_generator). Returns whether the op has one.
bool route_generators(const std::string& op, const c10::FunctionSchema& schema, c10::Device device,
                      torch::jit::Stack* stack) {
  const size_t count = schema.arguments().size();
  bool found = false;
  for (size_t i = 0; i < count; ++i) {
    if (!is_generator(schema.arguments()[i])) continue;
    found = true;
    c10::IValue& arg = (*stack)[stack->size() - count + i];
    std::optional<at::Generator> generator;
    if (arg.isGenerator()) generator = arg.toGenerator();
    arg = c10::IValue(host_generator(generator, device, op));
  }
  return found;
}

void warn_once(const std::string& op) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(op).second) return;
  }
  TORCH_WARN("backplane npu: ", op,
             " has no npu kernel; running it on the CPU (inputs copied to the host and results back). "
             "Shown once per op.");
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorName& name = op.operator_name();
  const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(name.name.rfind("aten::", 0) == 0, "backplane npu: ", full,
                              " has no npu kernel; the CPU fallback serves aten ops only, never another "
                              "library's ops (register a PrivateUse1 kernel for it)");
  TORCH_CHECK_NOT_IMPLEMENTED(!kMustRunOnDevice.count(name.name), "backplane npu: ", full,
                              " has no npu kernel and is blocked from the CPU fallback: matrix products and "
                              "convolutions must run on the device (add a PrivateUse1 kernel for it)");
  TORCH_CHECK_NOT_IMPLEMENTED(!returns_view(op.schema()), "backplane npu: ", full,
                              " has no npu kernel and returns a view, which the CPU fallback cannot make (a CPU "
                              "copy would not alias the npu tensor); register it for PrivateUse1");
  const auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const c10::Device device = op_device(check_one_device(full, args), args);
  // A capture refuses the host waits below: queued in stream order instead (npu_graph.h).
  if (device.type() == kNpu && is_capturing(current_stream(device.index()))) return captured_fallback(op, stack, device);
  const bool draws = route_generators(full, op.schema(), device, stack);
  TORCH_CHECK_NOT_IMPLEMENTED(draws || !op.hasTag(at::Tag::nondeterministic_seeded), "backplane npu: ", full,
                              " has no npu kernel and draws random numbers without a Generator argument: on the "
                              "CPU it would draw from the CPU's generator, not the npu's (register a PrivateUse1 "
                              "kernel for it)");
  warn_once(full);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace backplane::npu
