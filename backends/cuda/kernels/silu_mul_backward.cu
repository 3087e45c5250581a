// silu_mul_backward: with s = sigmoid(gate), dgate = grad * up * s * (1 + gate * (1 - s))
// and dup = grad * gate * s, at the broadcast shape of grad, gate and up, in opmath
// (float for float16 and bfloat16), each rounded once. One pass: three inputs read and
// two outputs written per element (elementwise.cuh with two outputs), so aligned
// contiguous operands take the 16-byte vector path; strided and broadcast ones are read
// in place through their strides.
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct SiluMulBackwardOp {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ __forceinline__ Outputs<scalar_t, 2> operator()(scalar_t grad, scalar_t gate, scalar_t up) const {
    const opmath_t g = static_cast<opmath_t>(grad), x = static_cast<opmath_t>(gate), u = static_cast<opmath_t>(up);
    const opmath_t s = opmath_t(1) / (opmath_t(1) + ::exp(-x));
    Outputs<scalar_t, 2> r;
    r[0] = static_cast<scalar_t>(g * u * s * (opmath_t(1) + x * (opmath_t(1) - s)));
    r[1] = static_cast<scalar_t>(g * x * s);
    return r;
  }
};

}  // namespace

namespace kernels {  // registered by silu_mul_backward.cpp

void silu_mul_backward(at::TensorBase& dgate, at::TensorBase& dup, const at::TensorBase& grad, const at::TensorBase& gate,
                       const at::TensorBase& up) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dgate.scalar_type(), "backplane_silu_mul_backward_cuda", [&] {
    launch_broadcast_outputs<scalar_t, 2, 3>("backplane::silu_mul_backward", {&dgate, &dup}, {&grad, &gate, &up},
                                             SiluMulBackwardOp<scalar_t>{});
  });
}

}  // namespace kernels
}  // namespace backplane::cuda
