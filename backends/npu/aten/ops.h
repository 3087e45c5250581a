// The minimal aten set a PrivateUse1 device must implement itself; everything else
// reaches the CPU fallback (fallback.cpp). Registered in aten/register.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>

#include <optional>

namespace backplane::npu {

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                 std::optional<at::Device> device, std::optional<bool> pin_memory,
                 std::optional<at::MemoryFormat> memory_format);
at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory);

// copy.cpp: every copy into, out of and between npu devices.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst);
at::Scalar local_scalar_dense(const at::Tensor& self);

// fill.cpp: constants are common enough (ones, zeros, full) to deserve kernels.
at::Tensor& fill_(at::Tensor& self, const at::Scalar& value);
at::Tensor& zero_(at::Tensor& self);

// matmul.cpp: matrix products run on the device (the fallback refuses them).
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);

// storage.cpp
const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> format);
at::Tensor& set_storage_(at::Tensor& self, at::Storage source, int64_t storage_offset, at::IntArrayRef size,
                         at::IntArrayRef stride);

// fallback.cpp
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace backplane::npu
