// The loop every binary elementwise CPU kernel shares: TensorIterator (broadcasting,
// strides), at::vec vectors, and opmath: float16/bfloat16 widened to float, the op
// applied, the result rounded once, as aten does. The kernel gives the op twice: on
// opmath_t scalars and on Vectorized<opmath_t>.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/native/cpu/Loops.h>

#include <type_traits>
#include <utility>

namespace backplane::cpu::CPU_CAPABILITY {

template <typename scalar_t, typename ScalarOp, typename VectorOp>
void opmath_binary_loop(at::TensorIteratorBase& iter, ScalarOp scalar_op, VectorOp vector_op) {
  using opmath_t = at::opmath_type<scalar_t>;
  using at::vec::Vectorized;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(iter, std::move(scalar_op), std::move(vector_op));
  } else {
    at::native::cpu_kernel_vec(
        iter,
        [scalar_op](scalar_t x, scalar_t y) -> scalar_t {
          return scalar_op(static_cast<opmath_t>(x), static_cast<opmath_t>(y));
        },
        [vector_op](Vectorized<scalar_t> x, Vectorized<scalar_t> y) {
          auto [x0, x1] = at::vec::convert_to_float<scalar_t>(x);
          auto [y0, y1] = at::vec::convert_to_float<scalar_t>(y);
          return at::vec::convert_from_float<scalar_t>(vector_op(x0, y0), vector_op(x1, y1));
        });
  }
}

}  // namespace backplane::cpu::CPU_CAPABILITY
