// The loop of the fused backward kernels (silu_mul_backward, mul_backward): two outputs
// from three inputs of one dtype, in one pass over a TensorIterator (broadcasting,
// strides), in opmath (float for float16 and bfloat16), each output rounded once. Runs
// where all five operands are unit-stride go through at::vec vectors (cpu_kernel_vec
// takes one output only, hence this loop); any other run (broadcast, strided) takes the
// scalar loop. The kernel gives its gradients once, as a functor callable on opmath_t
// scalars and on Vectorized<opmath_t>: grads(x0, x1, x2, y0, y1) sets y0 and y1.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <type_traits>

namespace backplane::cpu::CPU_CAPABILITY {
namespace two_output_detail {

using at::vec::Vectorized;

constexpr int kOperands = 5;  // two outputs, then three inputs

// Elements [0, n - n % vector size) of a unit-stride run; returns how many it did.
template <typename scalar_t, typename Grads>
int64_t vector_run(const Grads& grads, char** data, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = Vectorized<scalar_t>;
  auto* y0 = reinterpret_cast<scalar_t*>(data[0]);
  auto* y1 = reinterpret_cast<scalar_t*>(data[1]);
  const auto* x0 = reinterpret_cast<const scalar_t*>(data[2]);
  const auto* x1 = reinterpret_cast<const scalar_t*>(data[3]);
  const auto* x2 = reinterpret_cast<const scalar_t*>(data[4]);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    const Vec a = Vec::loadu(x0 + i), b = Vec::loadu(x1 + i), c = Vec::loadu(x2 + i);
    if constexpr (std::is_same_v<scalar_t, opmath_t>) {
      Vec r0, r1;
      grads(a, b, c, r0, r1);
      r0.store(y0 + i);
      r1.store(y1 + i);
    } else {  // float16/bfloat16: two float vectors each way
      auto [a0, a1] = at::vec::convert_to_float<scalar_t>(a);
      auto [b0, b1] = at::vec::convert_to_float<scalar_t>(b);
      auto [c0, c1] = at::vec::convert_to_float<scalar_t>(c);
      Vectorized<float> r00, r10, r01, r11;
      grads(a0, b0, c0, r00, r10);
      grads(a1, b1, c1, r01, r11);
      at::vec::convert_from_float<scalar_t>(r00, r01).store(y0 + i);
      at::vec::convert_from_float<scalar_t>(r10, r11).store(y1 + i);
    }
  }
  return i;
}

}  // namespace two_output_detail

// The iterator over (y0, y1, x0, x1, x2): y0 and y1 at the broadcast sizes of the inputs.
inline at::TensorIterator two_output_iterator(at::Tensor& y0, at::Tensor& y1, const at::Tensor& x0,
                                              const at::Tensor& x1, const at::Tensor& x2) {
  return at::TensorIteratorConfig()
      .add_output(y0)
      .add_output(y1)
      .add_const_input(x0)
      .add_const_input(x1)
      .add_const_input(x2)
      .build();
}

// (y0, y1) = grads(x0, x1, x2) elementwise over iter (two_output_iterator), scalar_t the
// dtype of every operand (the caller dispatches: AT_DISPATCH wants its name at compile time).
template <typename scalar_t, typename Grads>
void two_output_loop(at::TensorIteratorBase& iter, const Grads& grads) {
  using opmath_t = at::opmath_type<scalar_t>;
  iter.for_each([&grads](char** data, const int64_t* strides, int64_t n) {
    bool unit_stride = true;
    for (int k = 0; k < two_output_detail::kOperands; ++k) unit_stride = unit_stride && strides[k] == sizeof(scalar_t);
    const int64_t done = unit_stride ? two_output_detail::vector_run<scalar_t>(grads, data, n) : 0;
    for (int64_t i = done; i < n; ++i) {
      const auto in = [&](int k) -> opmath_t { return *reinterpret_cast<const scalar_t*>(data[k] + i * strides[k]); };
      opmath_t r0, r1;
      grads(in(2), in(3), in(4), r0, r1);
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = static_cast<scalar_t>(r0);
      *reinterpret_cast<scalar_t*>(data[1] + i * strides[1]) = static_cast<scalar_t>(r1);
    }
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY
