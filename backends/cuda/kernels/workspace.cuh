// Scratch memory for a kernel's partial results (rms_norm_backward's column sums,
// softmax_backward's chunk dots), freed when the op returns: the caching allocator hands it
// on only to work queued after ours on the stream (dependent_launch.cuh says why a dependent
// launch is safe too).
#pragma once

#include <ATen/core/TensorBase.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace backplane::cuda {

// A contiguous tensor of T on `like`'s device, allocated as aten's CUDA kernels allocate
// theirs (at::detail::empty_cuda: the current CUDA allocator, a pluggable one included),
// without at::empty's dispatcher round trip through BackendSelect and empty.memory_format.
template <typename T>
at::TensorBase workspace(c10::IntArrayRef sizes, const at::TensorBase& like) {
  return at::detail::empty_cuda(sizes, c10::CppTypeToScalarType<T>::value, like.device(), std::nullopt);
}

}  // namespace backplane::cuda
