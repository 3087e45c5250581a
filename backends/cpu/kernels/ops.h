// The CPU kernels of one instruction set. Every kernel first goes through the op's
// contract (core), then computes through a TensorIterator (elementwise ops: strides,
// broadcasting and at::parallel_for come from ATen's loop machinery) or its own
// parallel loop (rms_norm).
#pragma once

#include "../kernels.h"

#ifndef CPU_CAPABILITY
#error "kernels/*.cpp are built once per instruction set; CMake defines CPU_CAPABILITY"
#endif

namespace backplane::cpu::CPU_CAPABILITY {

at::Tensor identity_conv(const at::Tensor& x);
at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
void scale_(at::Tensor& x, double s);
void sin_out(const at::Tensor& x, at::Tensor& out);
at::Tensor crop(const at::Tensor& img, at::IntArrayRef box);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

const KernelTable& kernel_table();

}  // namespace backplane::cpu::CPU_CAPABILITY
