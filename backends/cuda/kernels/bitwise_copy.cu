#include "bitwise_copy.h"

#include "elementwise.cuh"

#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace backplane::cuda {
namespace {

struct Identity {
  template <typename T>
  __device__ __forceinline__ T operator()(T v) const {
    return v;
  }
};

template <typename bits_t>
void copy_as(std::string_view op, const at::Tensor& out, const void* in, c10::ArrayRef<int64_t> in_strides) {
  launch_elementwise<bits_t, 1>(op, out.device().index(), at::cuda::getCurrentCUDAStream(), out.sizes(),
                                static_cast<bits_t*>(out.data_ptr()), out.strides(),
                                {static_cast<const bits_t*>(in)}, {in_strides}, Identity{});
}

}  // namespace

void bitwise_copy(std::string_view op, const at::Tensor& out, const void* in, c10::ArrayRef<int64_t> in_strides) {
  switch (out.element_size()) {
    case 2: return copy_as<uint16_t>(op, out, in, in_strides);
    case 4: return copy_as<uint32_t>(op, out, in, in_strides);
    case 8: return copy_as<uint64_t>(op, out, in, in_strides);
    default: TORCH_CHECK(false, op, ": no CUDA copy for elements of ", out.element_size(), " bytes");
  }
}

}  // namespace backplane::cuda
