// aten ops without an npu kernel run on the CPU: inputs copied to the host, the CPU
// kernel, results copied back (at::native::cpu_fallback). It warns once per op, so a
// model's missing kernels show up in its log. Refused, with NotImplementedError:
// - ops that return a view: a CPU copy would not alias the npu tensor;
// - matrix products and convolutions (kMustRunOnDevice): the hot path of real
//   models; a silent round trip through the host would hide a missing kernel (mm,
//   bmm, addmm and baddbmm have npu kernels, matmul.cpp; their other overloads and
//   the convolutions do not);
// - ops outside aten: Backplane never computes its own ops on another device
//   (a missing backplane kernel is an error that names the op and the backend).
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
// are allowed, as on CUDA.
void check_one_device(const std::string& op, c10::ArrayRef<c10::IValue> args) {
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
  check_one_device(full, torch::jit::last(*stack, op.schema().arguments().size()));
  warn_once(full);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace backplane::npu
