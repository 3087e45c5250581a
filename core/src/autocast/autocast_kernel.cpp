// The Autocast kernel of every registry op, on AutocastCPU, AutocastCUDA and
// AutocastPrivateUse1: the same rule on every device.
//
// PyTorch casts aten ops' inputs under autocast by its per-op lists; a custom op without
// an Autocast kernel falls through and gets whatever dtypes its callers made, which under
// autocast are mixed (a linear's bfloat16 output beside a float32 weight), and the op
// contract refuses mixed dtypes. This kernel casts first, by the op's `autocast:` rule
// (registry.h's AutocastRule):
//  - promote (default): floating inputs to the widest floating input dtype;
//  - fp32: to float32;
//  - lower: to the device's autocast dtype (torch.get_autocast_dtype);
//  - an op that writes an argument: the written tensor is never cast (the write must
//    land in it); the other floating inputs are cast to its dtype.
// Only tensors on the kernel's device are cast, and float64 ones never are, as in
// PyTorch. Casts are at::autocast::cached_cast: autograd records them, and a float32
// leaf weight cast to the lower dtype is cast once per autocast region, as for aten ops.
#include "autocast/autocast_kernel.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace backplane::detail {
namespace {

bool is_written(const c10::Argument& arg) { return arg.alias_info() && arg.alias_info()->isWrite(); }

// A floating tensor on the autocast device (float64 included: a target, never a source).
bool on_device(const c10::IValue& value, c10::DeviceType device) {
  return value.isTensor() && value.toTensor().defined() && at::autocast::is_autocast_eligible(value.toTensor(), device);
}

// The dtype the op's inputs are cast to; nullopt: none is cast.
std::optional<at::ScalarType> target_dtype(AutocastRule rule, c10::DeviceType device, const c10::FunctionSchema& schema,
                                           std::span<const c10::IValue> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!is_written(schema.arguments()[i])) continue;
    if (!on_device(args[i], device)) return std::nullopt;
    return args[i].toTensor().scalar_type();
  }
  switch (rule) {
    case AutocastRule::Fp32:
      return at::kFloat;
    case AutocastRule::Lower:
      return at::autocast::get_autocast_dtype(device);
    case AutocastRule::Promote:
      break;
  }
  std::optional<at::ScalarType> widest;
  auto widen = [&](const c10::IValue& value) {
    if (on_device(value, device))
      widest = widest ? at::promote_types(*widest, value.toTensor().scalar_type()) : value.toTensor().scalar_type();
  };
  for (const c10::IValue& value : args) {
    widen(value);
    if (value.isTensorList())
      for (const c10::IValue& item : value.toListRef()) widen(item);
  }
  return widest;
}

void cast_inputs(at::ScalarType to, c10::DeviceType device, const c10::FunctionSchema& schema,
                 std::span<c10::IValue> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_written(schema.arguments()[i])) continue;
    c10::IValue& value = args[i];
    if (value.isTensor()) {
      value = at::autocast::cached_cast(to, value.toTensor(), device);
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> cast;
      for (const at::Tensor& t : value.toTensorVector()) cast.push_back(at::autocast::cached_cast(to, t, device));
      value = std::move(cast);
    }
  }
}

class AutocastKernel final : public c10::OperatorKernel {
 public:
  AutocastKernel(AutocastRule rule, c10::DeviceType device)
      : rule_(rule), device_(device), key_(at::autocast::get_autocast_dispatch_key_from_device_type(device)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    const c10::FunctionSchema& schema = op.schema();
    const size_t n = schema.arguments().size();
    std::span<c10::IValue> args(stack->data() + stack->size() - n, n);
    if (const auto to = target_dtype(rule_, device_, schema, args)) cast_inputs(*to, device_, schema, args);
    // Kernels run with autocast off for this device, as PyTorch's own autocast wrappers do:
    // the aten calls inside a kernel keep the dtypes it chose.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(key_);
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, key_), stack);
  }

 private:
  const AutocastRule rule_;
  const c10::DeviceType device_;
  const c10::DispatchKey key_;
};

}  // namespace

void register_autocast(torch::Library& library, const OpDef& op) {
  for (const c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::CUDA, c10::DeviceType::PrivateUse1}) {
    const c10::DispatchKey key = at::autocast::get_autocast_dispatch_key_from_device_type(device);
    library.impl(op.name.c_str(), torch::dispatch(key, torch::CppFunction::makeFromBoxedFunctor(
                                                            std::make_unique<AutocastKernel>(op.autocast, device))));
  }
}

}  // namespace backplane::detail
