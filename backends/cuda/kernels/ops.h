// The CUDA kernels of every registry op, one file each in this folder. Each first goes
// through the op's contract (core: dtypes, devices, shapes, the output), then
// launches on the current stream of the tensors' device under a CUDAGuard.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>

namespace backplane::cuda {

at::Tensor identity_conv(const at::Tensor& x);
at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
void scale_(at::Tensor& x, double s);
void sin_out(const at::Tensor& x, at::Tensor& out);
at::Tensor crop(const at::Tensor& img, at::IntArrayRef box);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace backplane::cuda
