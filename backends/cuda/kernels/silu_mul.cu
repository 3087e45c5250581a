// silu_mul: silu(gate) * up = gate / (1 + exp(-gate)) * up, with broadcasting, in opmath
// (float for float16 and bfloat16), rounded once. gate and up may be strided views (the
// two halves of one [..., 2H] projection): read in place through their strides; same-shape
// aligned contiguous operands take the 16-byte vector path (elementwise.cuh).
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct SiluMulOp {
  using opmath_t = at::opmath_type<scalar_t>;
  __device__ __forceinline__ scalar_t operator()(scalar_t gate, scalar_t up) const {
    const opmath_t g = static_cast<opmath_t>(gate);
    return static_cast<scalar_t>(g / (opmath_t(1) + ::exp(-g)) * static_cast<opmath_t>(up));
  }
};

}  // namespace

namespace kernels {  // registered by silu_mul.cpp

void silu_mul(at::TensorBase& out, const at::TensorBase& gate, const at::TensorBase& up) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_silu_mul_cuda", [&] {
    const auto gate_strides = broadcast_strides(gate, out.sizes());
    const auto up_strides = broadcast_strides(up, out.sizes());
    launch_elementwise<scalar_t, 2>("backplane::silu_mul", out.device().index(), at::cuda::getCurrentCUDAStream(),
                                    out.sizes(), out.mutable_data_ptr<scalar_t>(), out.strides(),
                                    {gate.const_data_ptr<scalar_t>(), up.const_data_ptr<scalar_t>()},
                                    {c10::ArrayRef<int64_t>(gate_strides), c10::ArrayRef<int64_t>(up_strides)},
                                    SiluMulOp<scalar_t>{});
  });
}

}  // namespace kernels
}  // namespace backplane::cuda
