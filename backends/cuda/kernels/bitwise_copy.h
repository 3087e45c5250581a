// out[i] = in[i], bit for bit, for identity_conv and crop: the element is moved as an
// unsigned integer of its size, so NaN payloads and -0.0 survive and one kernel
// serves every dtype of that size.
#pragma once

#include <ATen/core/TensorBase.h>
#include <c10/util/ArrayRef.h>

#include <string_view>

namespace backplane::cuda {

// Copies the elements of the view (in, in_strides) of out's sizes into out, any strides
// on both sides. `in` points at the view's first element. out.numel() > 0; the caller
// holds a CUDAGuard for out's device. A view laid out as out, out dense (a contiguous
// identity_conv, a whole-image crop), is one cudaMemcpyAsync; any other layout runs the
// elementwise copy kernel.
void bitwise_copy(std::string_view op, const at::TensorBase& out, const void* in, c10::ArrayRef<int64_t> in_strides);

}  // namespace backplane::cuda
