// `cpu_tensor.data = npu_tensor` (and back). Tensor.data's setter asks
// _has_compatible_shallow_copy_type, then makes the variable a shallow copy of the new
// tensor: its TensorImpl takes the other's storage, sizes, device and dispatch keys.
// PyTorch answers yes only for the same dispatch keys, so a CPU variable refuses npu
// data; the dispatcher sends a call with an npu argument here, and here the answer is
// also yes between plain strided CPU and npu tensors, whose TensorImpls are of one type
// (what the shallow copy needs), as PyTorch's XLA device does.
// Limits: strided tensors only; anything else keeps PyTorch's answer.
#include "device/launch.h"

#include <c10/core/TensorImpl.h>
#include <torch/library.h>

#include <typeinfo>

namespace backplane::npu {
namespace {

bool plain_cpu_or_npu(const at::Tensor& t) {
  return t.layout() == at::kStrided && (t.is_cpu() || is_npu(t)) && !t.is_quantized() &&
         typeid(*t.unsafeGetTensorImpl()) == typeid(c10::TensorImpl);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return plain_cpu_or_npu(self) && plain_cpu_or_npu(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

}  // namespace backplane::npu
