// Standalone probe behind the tile shape of the dense (vectorized) elementwise kernel in
// backends/cuda/kernels/elementwise.cuh: an add of two unit-stride tensors, 16-byte vectors,
// one tile a block, in variants of threads a block x vectors a thread. No torch here:
// elementwise_tiles.py compiles this file with nvcc into a shared library, calls the
// launchers through ctypes and times them from CUDA graphs beside torch.add and copy_.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

template <typename T>
struct alignas(16) Vec16 {
  T v[16 / sizeof(T)];
};

template <typename T>
__device__ __forceinline__ T add_one(T a, T b) {
  return static_cast<T>(static_cast<float>(a) + static_cast<float>(b));
}

// How a vector is loaded and stored: 0 plain, 1 through the read-only (non-coherent)
// cache (__ldg), 2 streaming loads and stores (__ldcs / __stcs), 3 streaming stores alone.
template <int MODE, typename V>
__device__ __forceinline__ V load(const V* p) {
  static_assert(sizeof(V) == 16);
  if constexpr (MODE == 1) {
    const int4 r = __ldg(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const V*>(&r);
  } else if constexpr (MODE == 2) {
    const int4 r = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const V*>(&r);
  } else {
    return *p;
  }
}

template <int MODE, typename V>
__device__ __forceinline__ void store(V* p, const V& v) {
  if constexpr (MODE >= 2)
    __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v));
  else
    *p = v;
}

// Thread t of block b takes vectors b * THREADS * U + t + k * THREADS, k < U: every load
// instruction of a warp covers 512 contiguous bytes. n is a whole number of vectors.
template <typename T, int THREADS, int U, int MODE>
__global__ void __launch_bounds__(THREADS) add_tiles(T* out, const T* a, const T* b, int64_t nvec) {
  using V = Vec16<T>;
  constexpr int W = 16 / sizeof(T);
  const auto* av = reinterpret_cast<const V*>(a);
  const auto* bv = reinterpret_cast<const V*>(b);
  auto* ov = reinterpret_cast<V*>(out);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * THREADS * U + threadIdx.x;
  V x[U], y[U];
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int64_t j = base + k * THREADS;
    if (j < nvec) {
      x[k] = load<MODE>(av + j);
      y[k] = load<MODE>(bv + j);
    }
  }
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int64_t j = base + k * THREADS;
    if (j < nvec) {
      V r;
#pragma unroll
      for (int e = 0; e < W; ++e) r.v[e] = add_one(x[k].v[e], y[k].v[e]);
      store<MODE>(ov + j, r);
    }
  }
}

// Inputs of stride 2 (x[::2] of a contiguous base), the output contiguous, one element an
// item: thread t of block b takes elements b * THREADS * U + t + k * THREADS, k < U.
template <typename T, int THREADS, int U>
__global__ void __launch_bounds__(THREADS) add_stride2(T* out, const T* a, const T* b, int n) {
  const int base = blockIdx.x * THREADS * U + threadIdx.x;
  T x[U], y[U];
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int j = base + k * THREADS;
    if (j < n) {
      x[k] = a[2 * j];
      y[k] = b[2 * j];
    }
  }
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int j = base + k * THREADS;
    if (j < n) out[j] = add_one(x[k], y[k]);
  }
}

// The same, but each item is a 16-byte vector of each input's base, of which every other
// element is used: 16 / (2 * sizeof(T)) outputs an item, stored as one 8-byte vector.
// n is a whole number of items.
template <typename T, int THREADS, int U>
__global__ void __launch_bounds__(THREADS) add_stride2_pairs(T* out, const T* a, const T* b, int items) {
  using V = Vec16<T>;
  constexpr int W = 16 / sizeof(T), O = W / 2;
  struct alignas(8) Half {
    T v[O];
  };
  const int base = blockIdx.x * THREADS * U + threadIdx.x;
  V x[U], y[U];
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int j = base + k * THREADS;
    if (j < items) {
      x[k] = reinterpret_cast<const V*>(a)[j];
      y[k] = reinterpret_cast<const V*>(b)[j];
    }
  }
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int j = base + k * THREADS;
    if (j < items) {
      Half r;
#pragma unroll
      for (int e = 0; e < O; ++e) r.v[e] = add_one(x[k].v[2 * e], y[k].v[2 * e]);
      reinterpret_cast<Half*>(out)[j] = r;
    }
  }
}

template <typename T, int THREADS, int U, int MODE>
int launch(void* out, const void* a, const void* b, int64_t nvec, cudaStream_t stream) {
  const int64_t per_block = static_cast<int64_t>(THREADS) * U;
  const auto grid = static_cast<unsigned>((nvec + per_block - 1) / per_block);
  add_tiles<T, THREADS, U, MODE><<<grid, THREADS, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                         static_cast<const T*>(b), nvec);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int launch_variant(int threads, int vecs, int mode, void* out, const void* a, const void* b, int64_t nvec,
                   cudaStream_t stream) {
#define BP_TILE(TH, U, M) \
  if (threads == TH && vecs == U && mode == M) return launch<T, TH, U, M>(out, a, b, nvec, stream);
  BP_TILE(128, 1, 0) BP_TILE(128, 2, 0) BP_TILE(128, 4, 0) BP_TILE(128, 8, 0)
  BP_TILE(256, 1, 0) BP_TILE(256, 2, 0) BP_TILE(256, 4, 0) BP_TILE(256, 8, 0)
  BP_TILE(512, 1, 0) BP_TILE(512, 2, 0) BP_TILE(512, 4, 0) BP_TILE(1024, 1, 0)
  BP_TILE(256, 4, 1) BP_TILE(256, 4, 2) BP_TILE(256, 4, 3)
  BP_TILE(512, 1, 1) BP_TILE(512, 1, 2) BP_TILE(512, 1, 3)
  BP_TILE(128, 1, 1) BP_TILE(128, 1, 2) BP_TILE(128, 1, 3)
#undef BP_TILE
  return -1;
}

// mode 0: one element an item; 1: 16-byte vectors of the base (add_stride2_pairs).
template <typename T>
int launch_stride2(int threads, int items_per_thread, int mode, void* out, const void* a, const void* b, int64_t n,
                   cudaStream_t stream) {
  constexpr int O = 16 / sizeof(T) / 2;
#define BP_S2(TH, U, M, KERNEL, ITEMS)                                                                          \
  if (threads == TH && items_per_thread == U && mode == M) {                                                    \
    const int64_t items = ITEMS;                                                                                \
    const auto grid = static_cast<unsigned>((items + TH * U - 1) / (TH * U));                                   \
    KERNEL<T, TH, U><<<grid, TH, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(a),                   \
                                              static_cast<const T*>(b), static_cast<int>(items));               \
    return static_cast<int>(cudaGetLastError());                                                                \
  }
  BP_S2(128, 4, 0, add_stride2, n) BP_S2(256, 4, 0, add_stride2, n) BP_S2(512, 1, 0, add_stride2, n)
  BP_S2(1024, 1, 0, add_stride2, n) BP_S2(256, 8, 0, add_stride2, n) BP_S2(128, 8, 0, add_stride2, n)
  BP_S2(128, 2, 0, add_stride2, n) BP_S2(256, 2, 0, add_stride2, n) BP_S2(512, 2, 0, add_stride2, n)
  BP_S2(128, 1, 1, add_stride2_pairs, n / O) BP_S2(256, 1, 1, add_stride2_pairs, n / O)
  BP_S2(256, 2, 1, add_stride2_pairs, n / O) BP_S2(1024, 1, 1, add_stride2_pairs, n / O)
  BP_S2(128, 4, 1, add_stride2_pairs, n / O)
#undef BP_S2
  return -1;
}

// f(T{}) for the element type `dtype` names (0 float32, 1 bfloat16, 2 float16), or -1.
template <typename F>
int with_dtype(int dtype, F f) {
  switch (dtype) {
    case 0: return f(float{});
    case 1: return f(__nv_bfloat16{});
    case 2: return f(__half{});
  }
  return -1;
}

}  // namespace

// Inputs x[::2] of contiguous bases, a contiguous output of n elements (see launch_stride2).
extern "C" int probe_add_stride2(int dtype, int threads, int items_per_thread, int mode, void* out, const void* a,
                                 const void* b, int64_t n, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return with_dtype(dtype, [&](auto t) {
    return launch_stride2<decltype(t)>(threads, items_per_thread, mode, out, a, b, n, s);
  });
}

// dtype as with_dtype; mode: as load() and store(). Returns a cudaError_t, or -1 for a
// variant not built.
extern "C" int probe_add(int dtype, int threads, int vecs, int mode, void* out, const void* a, const void* b,
                         int64_t nvec, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return with_dtype(dtype, [&](auto t) {
    return launch_variant<decltype(t)>(threads, vecs, mode, out, a, b, nvec, s);
  });
}
