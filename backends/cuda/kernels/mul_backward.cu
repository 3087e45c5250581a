// mul_backward: (da, db) = (grad * b, grad * a) at the broadcast shape of grad, a and b,
// in opmath (float for float16 and bfloat16), each rounded once, as mul rounds. One pass:
// three inputs read and two outputs written per element (elementwise.cuh with two
// outputs, five tensors of traffic where mul's formula ran two kernels and six), so
// aligned contiguous operands take the 16-byte vector path; strided and broadcast ones
// are read in place through their strides.
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct MulBackwardOp {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ __forceinline__ Outputs<scalar_t, 2> operator()(scalar_t grad, scalar_t a, scalar_t b) const {
    const opmath_t g = static_cast<opmath_t>(grad);
    Outputs<scalar_t, 2> r;
    r[0] = static_cast<scalar_t>(g * static_cast<opmath_t>(b));
    r[1] = static_cast<scalar_t>(g * static_cast<opmath_t>(a));
    return r;
  }
};

}  // namespace

namespace kernels {  // registered by mul_backward.cpp

void mul_backward(at::TensorBase& da, at::TensorBase& db, const at::TensorBase& grad, const at::TensorBase& a, const at::TensorBase& b) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, da.scalar_type(), "backplane_mul_backward_cuda", [&] {
    launch_broadcast_outputs<scalar_t, 2, 3>("backplane::mul_backward", {&da, &db}, {&grad, &a, &b},
                                             MulBackwardOp<scalar_t>{});
  });
}

}  // namespace kernels
}  // namespace backplane::cuda
