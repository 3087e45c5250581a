// The device side of the elementwise engine (elementwise.cuh, which picks among them per
// call and says when each is taken): the functor's outputs, and the three kernels —
// vectorized_kernel (64-bit indices, tiles of vectors), vector_per_thread_kernel (one
// vector a thread, 32-bit indices) and strided_kernel (OffsetCalculator or LinearOffsets,
// single elements or 16-byte vectors). Host code lives in elementwise.cuh.
#pragma once

#include "dependent_launch.cuh"
#include "launch_config.cuh"
#include "strided_indexing.cuh"
#include "vector_access.cuh"

#include <ATen/OpMathType.h>
#include <ATen/core/Array.h>

#include <cstdint>
#include <type_traits>

namespace backplane::cuda {

constexpr int kUnroll = 4;

// Items a strided thread takes: kUnroll, or 2 where an item widens to more than 16 bytes
// of opmath (16-byte vectors of float16 or bfloat16). With 4, nvcc converts every loaded
// bfloat16 value to float up front: 80 registers (float16: 48), three resident blocks a
// multiprocessor, and a bfloat16 row broadcast well behind float16's (see bench/results/).
// With 2: 46 registers.
template <typename scalar_t, int W>
constexpr bool kWidens = W * sizeof(at::opmath_type<scalar_t>) > kVectorBytes;
template <typename scalar_t, int W>
constexpr int kItemsPerThread = kWidens<scalar_t, W> ? 2 : kUnroll;

template <typename T, int N>
using PtrArray = at::detail::Array<const T*, N>;
template <typename T, int N>
using OutPtrArray = at::detail::Array<T*, N>;

// What f returns for NOUT outputs.
template <typename T, int NOUT>
using Outputs = at::detail::Array<T, NOUT>;

template <typename scalar_t, int NIN, typename Func>
__device__ __forceinline__ auto apply(const Func& f, const scalar_t (&v)[NIN]) {
  static_assert(NIN >= 1 && NIN <= 3, "elementwise ops take one to three inputs");
  if constexpr (NIN == 1)
    return f(v[0]);
  else if constexpr (NIN == 2)
    return f(v[0], v[1]);
  else
    return f(v[0], v[1], v[2]);
}

// Output k of f's result: the value itself when there is one output.
template <int NOUT, typename R>
__device__ __forceinline__ auto output(const R& r, int k) {
  if constexpr (NOUT == 1)
    return r;
  else
    return r[k];
}

// y[o] = f(x[0][e], ..., x[NIN-1][e]) for each element e of one W-element vector per operand.
template <typename scalar_t, int W, int NOUT, int NIN, typename Func>
__device__ __forceinline__ void apply_vector(const Func& f, const Vector<scalar_t, W> (&x)[NIN],
                                             Vector<scalar_t, W> (&y)[NOUT]) {
#pragma unroll
  for (int e = 0; e < W; ++e) {
    scalar_t v[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) v[k] = x[k].v[e];
    const auto r = apply<scalar_t, NIN>(f, v);
#pragma unroll
    for (int o = 0; o < NOUT; ++o) y[o].v[e] = output<NOUT>(r, o);
  }
}

// Element i of every operand: out[o][i] = f(in[0][i], ...)[o].
template <typename scalar_t, int NOUT, int NIN, typename Func, typename index_t>
__device__ __forceinline__ void apply_scalar(const Func& f, const OutPtrArray<scalar_t, NOUT>& out,
                                             const PtrArray<scalar_t, NIN>& in, index_t i) {
  scalar_t v[NIN];
#pragma unroll
  for (int k = 0; k < NIN; ++k) v[k] = in[k][i];
  const auto r = apply<scalar_t, NIN>(f, v);
#pragma unroll
  for (int o = 0; o < NOUT; ++o) out[o][i] = output<NOUT>(r, o);
}

// Elements [0, head) and [head + nvec * V, n) are scalar; [head, head + nvec * V)
// are nvec aligned vectors. A block takes tiles of kBlockThreads x kUnroll vectors.
template <typename scalar_t, int NOUT, int NIN, typename Func>
__global__ void __launch_bounds__(kBlockThreads)
    vectorized_kernel(LaunchControl launch, Func f, OutPtrArray<scalar_t, NOUT> out, PtrArray<scalar_t, NIN> in,
                      int64_t n, int64_t head) {
  begin_after_previous_grid(launch);
  constexpr int V = kVectorWidth<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  const int64_t nvec = (n - head) / V;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  const int64_t scalars = head + (n - head - nvec * V);
  if (tid < scalars) apply_scalar<scalar_t, NOUT, NIN>(f, out, in, tid < head ? tid : head + nvec * V + (tid - head));

  vec_t* out_v[NOUT];
#pragma unroll
  for (int o = 0; o < NOUT; ++o) out_v[o] = reinterpret_cast<vec_t*>(out[o] + head);
  const vec_t* in_v[NIN];
#pragma unroll
  for (int k = 0; k < NIN; ++k) in_v[k] = reinterpret_cast<const vec_t*>(in[k] + head);

  auto compute_store = [&](const vec_t (&x)[NIN], int64_t j) {
    vec_t y[NOUT];
    apply_vector(f, x, y);
#pragma unroll
    for (int o = 0; o < NOUT; ++o) out_v[o][j] = y[o];
  };

  constexpr int kThreads = kBlockThreads, kVecs = kUnroll;
  constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kVecs;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x; base < nvec;
       base += static_cast<int64_t>(gridDim.x) * kTile) {
    vec_t x[kVecs][NIN];
    if (base + (kVecs - 1) * kThreads < nvec) {
#pragma unroll
      for (int u = 0; u < kVecs; ++u)
#pragma unroll
        for (int k = 0; k < NIN; ++k) x[u][k] = in_v[k][base + u * kThreads];
#pragma unroll
      for (int u = 0; u < kVecs; ++u) compute_store(x[u], base + u * kThreads);
    } else {  // the last, partial tile
#pragma unroll
      for (int u = 0; u < kVecs; ++u)
        if (base + u * kThreads < nvec)
#pragma unroll
          for (int k = 0; k < NIN; ++k) x[u][k] = in_v[k][base + u * kThreads];
#pragma unroll
      for (int u = 0; u < kVecs; ++u)
        if (base + u * kThreads < nvec) compute_store(x[u], base + u * kThreads);
    }
  }
}

// Thread t takes vector t, and the threads past the last vector take the scalar head and
// tail. The vector path comes first and its indices are 32-bit, so a thread issues its
// loads after a few instructions.
template <typename scalar_t, int kThreads, int NOUT, int NIN, typename Func>
__global__ void __launch_bounds__(kThreads)
    vector_per_thread_kernel(LaunchControl launch, Func f, OutPtrArray<scalar_t, NOUT> out, PtrArray<scalar_t, NIN> in,
                             int n, int head, int nvec) {
  begin_after_previous_grid(launch);
  using vec_t = Vec16<scalar_t>;
  const int t = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (t < nvec) {
    vec_t x[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) x[k] = reinterpret_cast<const vec_t*>(in[k] + head)[t];
    vec_t y[NOUT];
    apply_vector(f, x, y);
#pragma unroll
    for (int o = 0; o < NOUT; ++o) reinterpret_cast<vec_t*>(out[o] + head)[t] = y[o];
    return;
  }
  const int s = t - nvec;  // the head's elements, then the tail's
  const int i = s < head ? s : head + nvec * kVectorWidth<scalar_t> + (s - head);
  if (i < n) apply_scalar<scalar_t, NOUT, NIN>(f, out, in, i);
}

// Operands 0..NOUT-1 of `calc` are the outputs, operand NOUT + k is input k. Items are
// W-element vectors (W = 1: single elements); calc's sizes, strides and n count vectors.
// Calc: OffsetCalculator, or LinearOffsets for a one-dimensional layout.
template <typename scalar_t, int W, int NOUT, int NIN, typename Calc, typename Func, int kThreads, int U>
__global__ void __launch_bounds__(kThreads)
    strided_kernel(LaunchControl launch, Func f, OutPtrArray<scalar_t, NOUT> out, PtrArray<scalar_t, NIN> in, Calc calc,
                   typename Calc::index_t n) {
  begin_after_previous_grid(launch);
  using index_t = typename Calc::index_t;
  using item_t = Vector<scalar_t, W>;
  item_t* out_w[NOUT];
#pragma unroll
  for (int o = 0; o < NOUT; ++o) out_w[o] = reinterpret_cast<item_t*>(out[o]);
  const item_t* in_w[NIN];
#pragma unroll
  for (int k = 0; k < NIN; ++k) in_w[k] = reinterpret_cast<const item_t*>(in[k]);
  constexpr index_t kTile = static_cast<index_t>(kThreads) * U;
  const index_t step = static_cast<index_t>(gridDim.x) * kTile;
  for (index_t base = static_cast<index_t>(blockIdx.x) * kTile; base < n; base += step) {
    item_t v[U][NIN];
    index_t out_offset[U][NOUT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t i = base + static_cast<index_t>(u * kThreads) + threadIdx.x;
      if (i < n) {
        const auto offsets = calc.get(i);
#pragma unroll
        for (int o = 0; o < NOUT; ++o) out_offset[u][o] = offsets[o];
#pragma unroll
        for (int k = 0; k < NIN; ++k) v[u][k] = in_w[k][offsets[NOUT + k]];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t i = base + static_cast<index_t>(u * kThreads) + threadIdx.x;
      if (i < n) {
        item_t y[NOUT];
        apply_vector(f, v[u], y);
#pragma unroll
        for (int o = 0; o < NOUT; ++o) out_w[o][out_offset[u][o]] = y[o];
      }
    }
  }
}

}  // namespace backplane::cuda
