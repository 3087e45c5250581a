// Matrix products on the device: mm, bmm, addmm and baddbmm (and their out= forms,
// which Inductor's generated code calls), queued on the current
// stream like any kernel. They are the hot path of a model, so the CPU fallback refuses
// them (fallback.cpp) rather than silently moving them through the host. The emulated
// device computes with ATen's CPU kernels over host views of its memory; a real backend
// calls its own BLAS here.
//
// Sizes, dtypes and devices are checked when the op is called, not when it runs: the op
// runs first on meta tensors of the same sizes and strides, which raises PyTorch's own
// messages and gives the output's sizes.
#include "device/launch.h"
#include "ops.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/mm.h>
#include <c10/util/Exception.h>

#include <string>

namespace backplane::npu {
namespace {

// t's sizes and strides on the meta device, after checking that t is on `device`.
at::Tensor meta_of(const char* op, const char* name, const at::Tensor& t, const c10::Device& device) {
  TORCH_CHECK(t.device() == device, "backplane npu: ", op, ": argument '", name, "' is on ", t.device(),
              ", expected ", device, " (the device of the first argument; the npu never copies between devices "
              "for you)");
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// A new npu tensor with the sizes the meta call gave, then `compute(host views)` queued.
template <typename Compute>
at::Tensor run_on_device(const char* op, const at::Tensor& meta_out, const c10::Device& device, Compute compute) {
  at::Tensor out = at::empty(meta_out.sizes(), meta_out.options().device(device));
  if (out.numel() > 0) launch(device.index(), op, [out, compute] { compute(host_view(out)); });
  return out;
}

// The out= form: out checked (device, dtype) and resized to the meta call's sizes,
// then `compute(host view of out)` queued.
template <typename Compute>
at::Tensor& run_into(const char* op, at::Tensor& out, const at::Tensor& meta_out, const c10::Device& device,
                     Compute compute) {
  meta_of(op, "out", out, device);
  TORCH_CHECK(out.scalar_type() == meta_out.scalar_type(), "backplane npu: ", op, ": out has dtype ",
              out.scalar_type(), ", expected ", meta_out.scalar_type());
  at::native::resize_output(out, meta_out.sizes());
  if (out.numel() > 0) launch(device.index(), op, [out, compute] { compute(host_view(out)); });
  return out;
}

}  // namespace

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::Device device = self.device();
  const at::Tensor meta = at::mm(meta_of("aten::mm", "self", self, device), meta_of("aten::mm", "mat2", mat2, device));
  return run_on_device("aten::mm", meta, device,
                       [self, mat2](at::Tensor out) { at::mm_out(out, host_view(self), host_view(mat2)); });
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::Device device = self.device();
  const at::Tensor meta = at::bmm(meta_of("aten::bmm", "self", self, device), meta_of("aten::bmm", "mat2", mat2, device));
  return run_on_device("aten::bmm", meta, device,
                       [self, mat2](at::Tensor out) { at::bmm_out(out, host_view(self), host_view(mat2)); });
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  const c10::Device device = mat1.device();
  const at::Tensor meta = at::addmm(meta_of("aten::addmm", "self", self, device),
                                    meta_of("aten::addmm", "mat1", mat1, device),
                                    meta_of("aten::addmm", "mat2", mat2, device), beta, alpha);
  return run_on_device("aten::addmm", meta, device, [self, mat1, mat2, beta, alpha](at::Tensor out) {
    at::addmm_out(out, host_view(self), host_view(mat1), host_view(mat2), beta, alpha);
  });
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::Device device = batch1.device();
  const at::Tensor meta = at::baddbmm(meta_of("aten::baddbmm", "self", self, device),
                                      meta_of("aten::baddbmm", "batch1", batch1, device),
                                      meta_of("aten::baddbmm", "batch2", batch2, device), beta, alpha);
  return run_on_device("aten::baddbmm", meta, device, [self, batch1, batch2, beta, alpha](at::Tensor out) {
    at::baddbmm_out(out, host_view(self), host_view(batch1), host_view(batch2), beta, alpha);
  });
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const c10::Device device = self.device();
  const at::Tensor meta = at::mm(meta_of("aten::mm.out", "self", self, device),
                                 meta_of("aten::mm.out", "mat2", mat2, device));
  return run_into("aten::mm.out", out, meta, device,
                  [self, mat2](at::Tensor host) { at::mm_out(host, host_view(self), host_view(mat2)); });
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const c10::Device device = self.device();
  const at::Tensor meta = at::bmm(meta_of("aten::bmm.out", "self", self, device),
                                  meta_of("aten::bmm.out", "mat2", mat2, device));
  return run_into("aten::bmm.out", out, meta, device,
                  [self, mat2](at::Tensor host) { at::bmm_out(host, host_view(self), host_view(mat2)); });
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  const c10::Device device = mat1.device();
  const at::Tensor meta = at::addmm(meta_of("aten::addmm.out", "self", self, device),
                                    meta_of("aten::addmm.out", "mat1", mat1, device),
                                    meta_of("aten::addmm.out", "mat2", mat2, device), beta, alpha);
  return run_into("aten::addmm.out", out, meta, device, [self, mat1, mat2, beta, alpha](at::Tensor host) {
    at::addmm_out(host, host_view(self), host_view(mat1), host_view(mat2), beta, alpha);
  });
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  const c10::Device device = batch1.device();
  const at::Tensor meta = at::baddbmm(meta_of("aten::baddbmm.out", "self", self, device),
                                      meta_of("aten::baddbmm.out", "batch1", batch1, device),
                                      meta_of("aten::baddbmm.out", "batch2", batch2, device), beta, alpha);
  return run_into("aten::baddbmm.out", out, meta, device, [self, batch1, batch2, beta, alpha](at::Tensor host) {
    at::baddbmm_out(host, host_view(self), host_view(batch1), host_view(batch2), beta, alpha);
  });
}

}  // namespace backplane::npu
