// The npu kernels of every registry op, one file each in this folder. Each goes
// through the op's contract on the host (dtypes, one device, shapes, the output),
// then queues its work on the current stream of the tensors' device and returns.
// The work is host code over host_view()s of device memory, computing with ATen's
// CPU ops: that body is what a vendor replaces with a launch of its own kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>

namespace backplane::npu {

at::Tensor identity_conv(const at::Tensor& x);
at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
void scale_(at::Tensor& x, double s);
void sin_out(const at::Tensor& x, at::Tensor& out);
at::Tensor crop(const at::Tensor& img, at::IntArrayRef box);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace backplane::npu
