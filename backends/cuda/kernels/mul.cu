// mul: a * b with broadcasting, in opmath (float for float16 and bfloat16), rounded
// once. A broadcast operand is read in place through stride-0 dimensions; same-shape
// aligned contiguous operands take the 16-byte vector path (elementwise.cuh).
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct MulOp {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ __forceinline__ scalar_t operator()(scalar_t a, scalar_t b) const {
    return static_cast<scalar_t>(static_cast<opmath_t>(a) * static_cast<opmath_t>(b));
  }
};

}  // namespace

namespace kernels {  // registered by mul.cpp

void mul(at::TensorBase& out, const at::TensorBase& a, const at::TensorBase& b) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_mul_cuda", [&] {
    const auto a_strides = broadcast_strides(a, out.sizes());
    const auto b_strides = broadcast_strides(b, out.sizes());
    launch_elementwise<scalar_t, 2>("backplane::mul", out.device().index(), at::cuda::getCurrentCUDAStream(),
                                    out.sizes(), out.mutable_data_ptr<scalar_t>(), out.strides(),
                                    {a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>()},
                                    {c10::ArrayRef<int64_t>(a_strides), c10::ArrayRef<int64_t>(b_strides)},
                                    MulOp<scalar_t>{});
  });
}

}  // namespace kernels
}  // namespace backplane::cuda
