// The CPU kernels, compiled once per instruction set (kernels/*.cpp are built for
// DEFAULT, AVX2 and AVX512; CMake sets CPU_CAPABILITY). register.cpp picks one table
// when the plugin loads, the way ATen's DispatchStub does.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace backplane::cpu {

struct KernelTable {
  at::Tensor (*identity_conv)(const at::Tensor& x);
  at::Tensor (*add)(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
  void (*scale_)(at::Tensor& x, double s);
  void (*sin_out)(const at::Tensor& x, at::Tensor& out);
  at::Tensor (*crop)(const at::Tensor& img, at::IntArrayRef box);
  at::Tensor (*rms_norm)(const at::Tensor& x, const at::Tensor& weight, double eps);
};

namespace DEFAULT { const KernelTable& kernel_table(); }
namespace AVX2 { const KernelTable& kernel_table(); }
namespace AVX512 { const KernelTable& kernel_table(); }

}  // namespace backplane::cpu
