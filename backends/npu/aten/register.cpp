// Registers the minimal aten set for PrivateUse1 and the CPU fallback for every
// other op. Registration only: implementations are in this folder; the view ops are
// ATen's own (they only rewrite sizes, strides and offset).
#include "ops.h"

#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace backplane::npu {
namespace {

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { cpu_fallback(op, stack); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty);
  m.impl("empty_strided", &empty_strided);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("fill_.Scalar", &fill_);
  m.impl("zero_", &zero_);
  m.impl("mm", &mm);
  m.impl("bmm", &bmm);
  m.impl("addmm", &addmm);
  m.impl("baddbmm", &baddbmm);
  m.impl("mm.out", &mm_out);
  m.impl("bmm.out", &bmm_out);
  m.impl("addmm.out", &addmm_out);
  m.impl("baddbmm.out", &baddbmm_out);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage_storage_offset", &set_storage_);
  m.impl("set_.source_Storage", &at::native::set_);
  m.impl("set_.source_Tensor", &at::native::set_tensor_);
  m.impl("view", &at::native::view);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }

}  // namespace backplane::npu
