// sin_out: out = sin(x); the contract checks that out already has x's sizes (it is
// never resized). sin is CUDA's sinf/sin (full-range, not the fast intrinsic __sinf), computed in
// opmath for float16 and bfloat16. out may be x itself, or strided.
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>

#include <type_traits>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct SinOp {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ __forceinline__ scalar_t operator()(scalar_t v) const {
    if constexpr (std::is_same_v<opmath_t, double>)
      return static_cast<scalar_t>(::sin(static_cast<double>(v)));
    else
      return static_cast<scalar_t>(::sinf(static_cast<float>(v)));
  }
};

template <typename scalar_t>
void launch_sin(std::string_view op, const at::TensorBase& x, at::TensorBase& out) {
  launch_elementwise<scalar_t, 1>(op, out.device().index(), at::cuda::getCurrentCUDAStream(), out.sizes(),
                                  out.mutable_data_ptr<scalar_t>(), out.strides(), {x.const_data_ptr<scalar_t>()},
                                  {x.strides()}, SinOp<scalar_t>{});
}

}  // namespace

namespace kernels {  // registered by sin_out.cpp

void sin_out(const at::TensorBase& x, at::TensorBase& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_sin_out_cuda",
                                  [&] { launch_sin<scalar_t>("backplane::sin_out", x, out); });
}

}  // namespace kernels
}  // namespace backplane::cuda
