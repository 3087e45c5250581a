// silu_mul_backward: with s = sigmoid(gate), dgate = grad * up * s * (1 + gate * (1 - s))
// and dup = grad * gate * s, both at the broadcast shape of grad, gate and up, in one
// pass (TensorIterator with two outputs), in opmath (float for float16 and bfloat16)
// and rounded once. Runs where all five operands are unit-stride go through at::vec
// vectors (cpu_kernel_vec takes one output only, hence the loop here); any other run
// (broadcast, strided) takes the scalar loop.
#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>
#include <type_traits>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

template <typename T>
T exp_of_neg(T x) {
  return std::exp(-x);
}

template <typename T>
Vectorized<T> exp_of_neg(Vectorized<T> x) {
  return x.neg().exp();
}

// T: an opmath scalar or a Vectorized of them.
template <typename T>
void silu_mul_grads(T grad, T gate, T up, T& dgate, T& dup) {
  const T one(1);
  const T s = one / (one + exp_of_neg(gate));
  dgate = grad * up * s * (one + gate * (one - s));
  dup = grad * gate * s;
}

constexpr int kOperands = 5;  // dgate, dup (outputs), grad, gate, up

// Elements [0, n - n % vector size) of a unit-stride run; returns how many it did.
template <typename scalar_t>
int64_t vector_run(char** data, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = Vectorized<scalar_t>;
  auto* dgate = reinterpret_cast<scalar_t*>(data[0]);
  auto* dup = reinterpret_cast<scalar_t*>(data[1]);
  const auto* grad = reinterpret_cast<const scalar_t*>(data[2]);
  const auto* gate = reinterpret_cast<const scalar_t*>(data[3]);
  const auto* up = reinterpret_cast<const scalar_t*>(data[4]);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    const Vec g = Vec::loadu(grad + i), x = Vec::loadu(gate + i), u = Vec::loadu(up + i);
    if constexpr (std::is_same_v<scalar_t, opmath_t>) {
      Vec dg, du;
      silu_mul_grads(g, x, u, dg, du);
      dg.store(dgate + i);
      du.store(dup + i);
    } else {  // float16/bfloat16: two float vectors each way
      auto [g0, g1] = at::vec::convert_to_float<scalar_t>(g);
      auto [x0, x1] = at::vec::convert_to_float<scalar_t>(x);
      auto [u0, u1] = at::vec::convert_to_float<scalar_t>(u);
      Vectorized<float> dg0, du0, dg1, du1;
      silu_mul_grads(g0, x0, u0, dg0, du0);
      silu_mul_grads(g1, x1, u1, dg1, du1);
      at::vec::convert_from_float<scalar_t>(dg0, dg1).store(dgate + i);
      at::vec::convert_from_float<scalar_t>(du0, du1).store(dup + i);
    }
  }
  return i;
}

template <typename scalar_t>
void silu_mul_backward_loop(at::TensorIteratorBase& iter) {
  using opmath_t = at::opmath_type<scalar_t>;
  iter.for_each([](char** data, const int64_t* strides, int64_t n) {
    bool unit_stride = true;
    for (int k = 0; k < kOperands; ++k) unit_stride = unit_stride && strides[k] == sizeof(scalar_t);
    const int64_t done = unit_stride ? vector_run<scalar_t>(data, n) : 0;
    for (int64_t i = done; i < n; ++i) {
      const auto ptr = [&](int k) { return data[k] + i * strides[k]; };
      opmath_t dg, du;
      silu_mul_grads<opmath_t>(*reinterpret_cast<const scalar_t*>(ptr(2)), *reinterpret_cast<const scalar_t*>(ptr(3)),
                               *reinterpret_cast<const scalar_t*>(ptr(4)), dg, du);
      *reinterpret_cast<scalar_t*>(ptr(0)) = static_cast<scalar_t>(dg);
      *reinterpret_cast<scalar_t*>(ptr(1)) = static_cast<scalar_t>(du);
    }
  });
}

}  // namespace

void silu_mul_backward(at::Tensor& dgate, at::Tensor& dup, const at::Tensor& grad, const at::Tensor& gate,
                       const at::Tensor& up) {
  auto iter = at::TensorIteratorConfig()
                  .add_output(dgate)
                  .add_output(dup)
                  .add_const_input(grad)
                  .add_const_input(gate)
                  .add_const_input(up)
                  .build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dgate.scalar_type(), "backplane_silu_mul_backward",
                                  [&] { silu_mul_backward_loop<scalar_t>(iter); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): compute-bound (an exp per element),
// so it runs faster than the AVX2 build in float32 and bfloat16 (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(silu_mul_backward, silu_mul_backward)
