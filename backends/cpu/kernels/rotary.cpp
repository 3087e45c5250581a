// rotary: each pair (x1, x2) = (x[..., i], x[..., i + D/2]) becomes
// (x1 * cos - x2 * sin, x2 * cos + x1 * sin), cos and sin indexed [..., i] and broadcast.
// One TensorIterator over the halved shape with two outputs (the halves of out) and four
// inputs (the halves of x, cos, sin), so any strides work, q and k sliced from a fused
// qkv tensor included. Rows whose operands are all unit-stride take at::vec vectors;
// float16/bfloat16 are computed in float and rounded once.
#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <type_traits>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

// Operand order in the iterator.
enum { kOut1, kOut2, kX1, kX2, kCos, kSin, kOperands };

template <typename T>
void rotate(T x1, T x2, T c, T s, T& y1, T& y2) {
  y1 = x1 * c - x2 * s;
  y2 = x2 * c + x1 * s;
}

template <typename scalar_t>
void rotate_contiguous(char* const* data, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto* y1 = reinterpret_cast<scalar_t*>(data[kOut1]);
  auto* y2 = reinterpret_cast<scalar_t*>(data[kOut2]);
  const auto* x1 = reinterpret_cast<const scalar_t*>(data[kX1]);
  const auto* x2 = reinterpret_cast<const scalar_t*>(data[kX2]);
  const auto* c = reinterpret_cast<const scalar_t*>(data[kCos]);
  const auto* s = reinterpret_cast<const scalar_t*>(data[kSin]);
  constexpr int64_t L = Vectorized<scalar_t>::size();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto a = Vectorized<scalar_t>::loadu(x1 + i), b = Vectorized<scalar_t>::loadu(x2 + i);
    const auto cv = Vectorized<scalar_t>::loadu(c + i), sv = Vectorized<scalar_t>::loadu(s + i);
    if constexpr (std::is_same_v<scalar_t, opmath_t>) {
      Vectorized<scalar_t> r1, r2;
      rotate(a, b, cv, sv, r1, r2);
      r1.store(y1 + i);
      r2.store(y2 + i);
    } else {  // two float vectors per reduced-precision vector
      auto [a0, a1] = at::vec::convert_to_float<scalar_t>(a);
      auto [b0, b1] = at::vec::convert_to_float<scalar_t>(b);
      auto [c0, c1] = at::vec::convert_to_float<scalar_t>(cv);
      auto [s0, s1] = at::vec::convert_to_float<scalar_t>(sv);
      Vectorized<opmath_t> p0, p1, q0, q1;
      rotate(a0, b0, c0, s0, p0, q0);
      rotate(a1, b1, c1, s1, p1, q1);
      at::vec::convert_from_float<scalar_t>(p0, p1).store(y1 + i);
      at::vec::convert_from_float<scalar_t>(q0, q1).store(y2 + i);
    }
  }
  for (; i < n; ++i) {
    opmath_t r1, r2;
    rotate<opmath_t>(x1[i], x2[i], c[i], s[i], r1, r2);
    y1[i] = static_cast<scalar_t>(r1);
    y2[i] = static_cast<scalar_t>(r2);
  }
}

template <typename scalar_t>
void rotate_strided(char* const* data, const int64_t* strides, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto ptr = [&](int k, int64_t i) { return data[k] + i * strides[k]; };
  for (int64_t i = 0; i < n; ++i) {
    auto load = [&](int k) { return static_cast<opmath_t>(*reinterpret_cast<const scalar_t*>(ptr(k, i))); };
    opmath_t r1, r2;
    rotate(load(kX1), load(kX2), load(kCos), load(kSin), r1, r2);
    *reinterpret_cast<scalar_t*>(ptr(kOut1, i)) = static_cast<scalar_t>(r1);
    *reinterpret_cast<scalar_t*>(ptr(kOut2, i)) = static_cast<scalar_t>(r2);
  }
}

}  // namespace

void rotary(at::Tensor& out, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor y1 = out.narrow(-1, 0, half), y2 = out.narrow(-1, half, half);
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  auto iter = at::TensorIteratorConfig()
                  .add_output(y1)
                  .add_output(y2)
                  .add_const_input(x1)
                  .add_const_input(x2)
                  .add_const_input(cos)
                  .add_const_input(sin)
                  .resize_outputs(false)
                  .build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_rotary", [&] {
    iter.for_each([](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
      char* ptrs[kOperands];
      for (int k = 0; k < kOperands; ++k) ptrs[k] = data[k];
      bool unit = true;
      for (int k = 0; k < kOperands; ++k) unit = unit && strides[k] == static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t row = 0; row < size1; ++row) {
        if (unit)
          rotate_contiguous<scalar_t>(ptrs, size0);
        else
          rotate_strided<scalar_t>(ptrs, strides, size0);
        for (int k = 0; k < kOperands; ++k) ptrs[k] += strides[kOperands + k];
      }
    });
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(rotary, rotary)
