// add: a + alpha * b with broadcasting, computed in opmath (float for float16 and
// bfloat16) and rounded once, as aten does. A broadcast operand is read in place
// through stride-0 dimensions (strided kernel); same-shape contiguous operands whose
// addresses share their offset modulo 16 take the 16-byte vector path.
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/core/Scalar.h>
#include <c10/cuda/CUDAStream.h>

namespace backplane::cuda {
namespace {

template <typename scalar_t>
struct AddOp {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t alpha;
  __device__ __forceinline__ scalar_t operator()(scalar_t a, scalar_t b) const {
    return static_cast<scalar_t>(static_cast<opmath_t>(a) + alpha * static_cast<opmath_t>(b));
  }
};

template <typename scalar_t>
void launch_add(std::string_view op, const at::TensorBase& a, const at::TensorBase& b, const at::Scalar& alpha,
                at::TensorBase& out) {
  const auto a_strides = broadcast_strides(a, out.sizes());
  const auto b_strides = broadcast_strides(b, out.sizes());
  launch_elementwise<scalar_t, 2>(op, out.device().index(), at::cuda::getCurrentCUDAStream(), out.sizes(),
                                  out.mutable_data_ptr<scalar_t>(), out.strides(),
                                  {a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>()},
                                  {c10::ArrayRef<int64_t>(a_strides), c10::ArrayRef<int64_t>(b_strides)},
                                  AddOp<scalar_t>{alpha.to<at::opmath_type<scalar_t>>()});
}

}  // namespace

namespace kernels {  // registered by add.cpp

void add(at::TensorBase& out, const at::TensorBase& a, const at::TensorBase& b, const at::Scalar& alpha) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_add_cuda",
                                  [&] { launch_add<scalar_t>("backplane::add", a, b, alpha, out); });
}

}  // namespace kernels
}  // namespace backplane::cuda
