// scale_: x *= s in place through x's own strides, so a strided view writes only its
// own elements. Computed in opmath (float for float16 and bfloat16). A transposed or
// offset x that is dense in memory still takes the vector path (strided_indexing.cuh
// orders and merges its dimensions; elementwise.cuh peels the misaligned head).
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct ScaleOp {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t s;
  __device__ __forceinline__ scalar_t operator()(scalar_t v) const {
    return static_cast<scalar_t>(static_cast<opmath_t>(v) * s);
  }
};

template <typename scalar_t>
void launch_scale(std::string_view op, at::TensorBase& x, double s) {
  scalar_t* data = x.mutable_data_ptr<scalar_t>();
  launch_elementwise<scalar_t, 1>(op, x.device().index(), at::cuda::getCurrentCUDAStream(), x.sizes(), data,
                                  x.strides(), {data}, {x.strides()},
                                  ScaleOp<scalar_t>{static_cast<at::opmath_type<scalar_t>>(s)});
}

}  // namespace

namespace kernels {  // registered by scale.cpp

void scale_(at::TensorBase& x, double s) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_scale__cuda",
                                  [&] { launch_scale<scalar_t>("backplane::scale_", x, s); });
}

}  // namespace kernels
}  // namespace backplane::cuda
