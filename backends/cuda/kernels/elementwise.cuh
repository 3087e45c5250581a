// The elementwise engine behind identity_conv, add, mul, silu_mul, scale_, sin_out and
// crop: out[i] = f(in_0[i], ..., in_{NIN-1}[i]) over one shape, every operand with its
// own strides, all of one scalar type. NOUT outputs: f returns Outputs<scalar_t, NOUT>
// (one value per output; silu_mul_backward's dgate and dup, mul_backward's da and db), or
// a scalar_t for one.
//
// Three paths, picked per call from the merged layout (strided_indexing.cuh):
// - vectorized: every operand is one unit-stride run and their addresses share one
//   offset modulo 16. Up to 2^31 - 1 elements, vector_per_thread_kernel: one 16-byte
//   vector per operand a thread, 32-bit indices, the vector path first, threads past the
//   last vector taking the scalar head (up to 16-byte alignment) and tail. Blocks of 128
//   threads where the vectors fit the threads the device holds at once (1M float32
//   elements on an H100; there it matches aten's kernel in instructions and duration
//   under ncu), of 1024 threads past that (launch site says why). Larger inputs take
//   vectorized_kernel: 64-bit indices, tiles of kUnroll x 256 vectors per operand
//   (thread t takes vectors t, t + 256, ...: coalesced), one tile a block.
// - transposed tiles (transposed_tiles.cuh): two dimensions, each operand unit-stride in
//   one of them and not all in the same one (x.t() + y); 32 x 32 tiles through shared memory.
// - strided: anything else (transposes, slices, misaligned views, broadcasts). Each
//   thread handles kItemsPerThread items in 256-thread blocks (single elements of 4 bytes
//   or more: 2 in 512-thread blocks; one, in 128-thread blocks, where the items fit the
//   device's resident threads), all loads issued before the first store, offsets
//   from OffsetCalculator in 32-bit arithmetic when the layout fits, else 64-bit. A
//   layout that merges to one dimension (a sliced x[:, ::2] of a contiguous base) and
//   fits 32 bits takes LinearOffsets instead: offset = index * stride, no division and
//   no loop over dimensions (under ncu, well under the instructions of aten's
//   elementwise_kernel<128, 4> for a stride-2 add). When the innermost dimension is
//   unit-stride in every operand, a whole number of 16-byte vectors long, and every other
//   stride and every address 16-byte aligned (a row broadcast [T, H] + [H], an aligned
//   crop), its elements are 16-byte vectors.
// The output may be the same memory as an input (in place, or sin_out's out = x):
// each element is read and written by one thread, its read first.
#pragma once

#include "dependent_launch.cuh"
#include "elementwise_kernels.cuh"
#include "launch_config.cuh"
#include "strided_indexing.cuh"
#include "transposed_tiles.cuh"
#include "vector_access.cuh"

#include <ATen/OpMathType.h>
#include <ATen/core/Array.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/core/TensorBase.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cuda_runtime_api.h>

#include <array>
#include <limits>
#include <string_view>
#include <type_traits>

namespace backplane::cuda {

// t's strides for the broadcast shape `sizes`: 0 where t is expanded (a missing
// leading dimension, or size 1 against a larger size). For the binary ops (add, mul).
inline c10::SmallVector<int64_t, 8> broadcast_strides(const at::TensorBase& t, at::IntArrayRef sizes) {
  const int64_t lead = static_cast<int64_t>(sizes.size()) - t.dim();
  c10::SmallVector<int64_t, 8> strides(sizes.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) strides[lead + d] = t.size(d) == sizes[lead + d] ? t.stride(d) : 0;
  return strides;
}

// The layout in units of W-element vectors, or false when some operand's innermost
// dimension is not unit-stride whole vectors, or another stride or an address is not
// 16-byte aligned.
template <typename scalar_t, int N>
bool as_vectors(StridedLayout<N>& layout, const std::array<const void*, N>& ptrs) {
  constexpr int64_t W = kVectorWidth<scalar_t>;
  if (layout.ndim < 2 || layout.sizes[0] % W != 0) return false;
  for (int k = 0; k < N; ++k) {
    if (layout.strides[0][k] != 1 || !is_vector_aligned(ptrs[k])) return false;
    for (int d = 1; d < layout.ndim; ++d)
      if (layout.strides[d][k] % W != 0) return false;
  }
  layout.sizes[0] /= W;
  for (int k = 0; k < N; ++k)
    for (int d = 1; d < layout.ndim; ++d) layout.strides[d][k] /= W;
  return true;
}

// One launch of strided_kernel: kThreads threads a block, U items a thread, one tile a block.
template <typename scalar_t, int W, int NOUT, int NIN, int kThreads, int U, typename Calc, typename Func>
void launch_strided_tiles(cudaStream_t stream, const Calc& calc, int64_t n, const OutPtrArray<scalar_t, NOUT>& out,
                          const PtrArray<scalar_t, NIN>& in, const Func& f) {
  const int64_t grid = blocks_for(n, static_cast<int64_t>(kThreads) * U, kMaxGridBlocks);
  launch_kernel(strided_kernel<scalar_t, W, NOUT, NIN, Calc, Func, kThreads, U>, static_cast<unsigned>(grid), kThreads,
                stream, f, out, in, calc, static_cast<typename Calc::index_t>(n));
}

template <typename scalar_t, int W, int NOUT, int NIN, typename Func>
void launch_strided(c10::DeviceIndex device, cudaStream_t stream, const StridedLayout<NOUT + NIN>& layout,
                    const OutPtrArray<scalar_t, NOUT>& out, const PtrArray<scalar_t, NIN>& in, Func f) {
  constexpr int N = NOUT + NIN;
  // One tile per block, as the vectorized path: a resident-blocks grid looping grid-stride
  // left a sliced (stride 2) float32 add behind torch.add (see bench/results/).
  // Single elements of 4 bytes or more take 512-thread blocks of 2 items a thread (the same
  // 1024-item tile): on a large stride-2 float32 add (experiments/elementwise_tiles.py
  // --sliced) that edges past 256 x 4 and reaches torch.add. 2-byte elements stay at
  // 256 x 4, where 512 x 2 gained nothing.
  constexpr bool kWideScalars = W == 1 && sizeof(scalar_t) >= 4;
  constexpr int kThreads = kWideScalars ? 512 : kBlockThreads;
  constexpr int U = kWideScalars ? 2 : kItemsPerThread<scalar_t, W>;
  const int64_t n = layout.numel();
  if (!layout.fits_32bit()) {
    launch_strided_tiles<scalar_t, W, NOUT, NIN, kThreads, U>(stream, OffsetCalculator<N, int64_t>(layout), n, out,
                                                             in, f);
    return;
  }
  auto launch_32bit = [&](const auto& calc) {
    if (n <= resident_threads(device)) {
      // At most one item per thread the device holds: one item a thread in 128-thread
      // blocks, as the vectorized path. A 1M-element row broadcast ([1024, 1024] + [1024],
      // 16-byte items) otherwise ran 256 blocks, two a multiprocessor, and was slower in
      // float32 and bfloat16 (see bench/results/).
      launch_strided_tiles<scalar_t, W, NOUT, NIN, 128, 1>(stream, calc, n, out, in, f);
    } else {
      launch_strided_tiles<scalar_t, W, NOUT, NIN, kThreads, U>(stream, calc, n, out, in, f);
    }
  };
  // One dimension: LinearOffsets, which beats OffsetCalculator and aten on a stride-2 add
  // (see bench/results/). A vector layout has two dimensions at least (as_vectors): only
  // W = 1 needs this.
  if constexpr (W == 1) {
    if (layout.ndim == 1) {
      launch_32bit(LinearOffsets<N>(layout));
      return;
    }
  }
  launch_32bit(OffsetCalculator<N, unsigned int>(layout));
}

// Runs f over `sizes` (numel > 0) with NOUT outputs (f returns Outputs<scalar_t, NOUT>).
// `op` names the op in errors. The caller holds a CUDAGuard for `device`; `stream` is
// that device's current stream.
template <typename scalar_t, int NOUT, int NIN, typename Func>
void launch_elementwise_outputs(std::string_view op, c10::DeviceIndex device, cudaStream_t stream,
                                c10::ArrayRef<int64_t> sizes, const std::array<scalar_t*, NOUT>& out,
                                const std::array<c10::ArrayRef<int64_t>, NOUT>& out_strides,
                                const std::array<const scalar_t*, NIN>& in,
                                const std::array<c10::ArrayRef<int64_t>, NIN>& in_strides, Func f) {
  constexpr int N = NOUT + NIN;
  std::array<c10::ArrayRef<int64_t>, N> strides;
  for (int o = 0; o < NOUT; ++o) strides[o] = out_strides[o];
  for (int k = 0; k < NIN; ++k) strides[NOUT + k] = in_strides[k];
  StridedLayout<N> layout = make_layout<N>(op, sizes, strides);
  if (layout.ndim == 0) {  // a 0-d tensor or all sizes 1: one element
    layout.ndim = 1;
    layout.sizes[0] = 1;
    for (int k = 0; k < N; ++k) layout.strides[0][k] = 1;
  }
  const int64_t n = layout.numel();
  PtrArray<scalar_t, NIN> in_ptrs;
  for (int k = 0; k < NIN; ++k) in_ptrs[k] = in[k];
  OutPtrArray<scalar_t, NOUT> out_ptrs;
  for (int o = 0; o < NOUT; ++o) out_ptrs[o] = out[o];

  bool same_misalignment = layout.unit_stride() && misalignment(out[0]) % sizeof(scalar_t) == 0;
  for (int o = 1; o < NOUT && same_misalignment; ++o) same_misalignment = misalignment(out[o]) == misalignment(out[0]);
  for (int k = 0; k < NIN && same_misalignment; ++k) same_misalignment = misalignment(in[k]) == misalignment(out[0]);
  if (same_misalignment) {
    const int64_t head = std::min<int64_t>(
        n, (kVectorBytes - misalignment(out[0])) % kVectorBytes / static_cast<int64_t>(sizeof(scalar_t)));
    const int64_t vectors = (n - head) / kVectorWidth<scalar_t>;
    if (n <= std::numeric_limits<int>::max()) {
      // One vector a thread; the scalar head and tail take threads of their own past the
      // last vector. Up to one vector per thread the device holds (1M float32 elements on
      // an H100), 128-thread blocks: about one wave. (A functor heavy in registers fits
      // fewer threads than that; it then takes a second, partial wave.) Past that,
      // 1024-thread blocks: at 16M-64M elements (experiments/elementwise_tiles.py), the
      // only shape of those tried (128-1024 threads x 1-8 vectors a thread, plain,
      // read-only or streaming loads) at or above torch.add in every dtype (see
      // bench/results/).
      const int64_t scalars = n - vectors * kVectorWidth<scalar_t>;
      auto launch_vector_per_thread = [&](auto threads) {
        constexpr int kThreads = decltype(threads)::value;
        const int64_t grid = blocks_for(vectors + scalars, kThreads, kMaxGridBlocks);
        launch_kernel(vector_per_thread_kernel<scalar_t, kThreads, NOUT, NIN, Func>, static_cast<unsigned>(grid),
                      kThreads, stream, f, out_ptrs, in_ptrs, static_cast<int>(n), static_cast<int>(head),
                      static_cast<int>(vectors));
      };
      if (vectors <= resident_threads(device))
        launch_vector_per_thread(std::integral_constant<int, 128>{});
      else
        launch_vector_per_thread(std::integral_constant<int, kMaxBlockThreads>{});
    } else {
      // Past 2^31 - 1 elements, 64-bit indices: tiles of kBlockThreads x kUnroll vectors,
      // one a block (the grid-stride loop only matters past 2^31 - 1 blocks): at 256 MiB
      // to 1 GiB, a grid of only the resident blocks looping grid-stride fell short of
      // copy_, where one tile per block kept up with it (see bench/results/).
      const int64_t grid = blocks_for(vectors, kBlockThreads * kUnroll, kMaxGridBlocks);
      launch_kernel(vectorized_kernel<scalar_t, NOUT, NIN, Func>, static_cast<unsigned>(grid), kBlockThreads, stream, f,
                    out_ptrs, in_ptrs, n, head);
    }
    return;
  }
  TileLayout<N> tiles;
  if (as_transposed_tiles(layout, tiles)) {
    launch_transposed_tiles<scalar_t, NOUT, NIN>(stream, tiles, out_ptrs, in_ptrs, f);
    return;
  }
  std::array<const void*, N> ptrs;
  for (int o = 0; o < NOUT; ++o) ptrs[o] = out[o];
  for (int k = 0; k < NIN; ++k) ptrs[NOUT + k] = in[k];
  if (as_vectors<scalar_t, N>(layout, ptrs))
    launch_strided<scalar_t, kVectorWidth<scalar_t>, NOUT, NIN>(device, stream, layout, out_ptrs, in_ptrs, f);
  else
    launch_strided<scalar_t, 1, NOUT, NIN>(device, stream, layout, out_ptrs, in_ptrs, f);
}

// f over the outputs' sizes (the broadcast shape of the inputs, as the op contract
// allocated them), each input read in place through its broadcast strides: the fused
// backward ops (silu_mul_backward, mul_backward). On the current stream of the outputs'
// device, whose CUDAGuard the caller holds.
template <typename scalar_t, int NOUT, int NIN, typename Func>
void launch_broadcast_outputs(std::string_view op, const std::array<at::TensorBase*, NOUT>& out,
                              const std::array<const at::TensorBase*, NIN>& in, Func f) {
  const at::IntArrayRef sizes = out[0]->sizes();
  std::array<scalar_t*, NOUT> out_ptrs;
  std::array<c10::ArrayRef<int64_t>, NOUT> out_strides;
  for (int o = 0; o < NOUT; ++o) {
    out_ptrs[o] = out[o]->template mutable_data_ptr<scalar_t>();
    out_strides[o] = out[o]->strides();
  }
  std::array<c10::SmallVector<int64_t, 8>, NIN> in_broadcast_strides;
  std::array<const scalar_t*, NIN> in_ptrs;
  std::array<c10::ArrayRef<int64_t>, NIN> in_strides;
  for (int k = 0; k < NIN; ++k) {
    in_broadcast_strides[k] = broadcast_strides(*in[k], sizes);
    in_ptrs[k] = in[k]->template const_data_ptr<scalar_t>();
    in_strides[k] = in_broadcast_strides[k];
  }
  launch_elementwise_outputs<scalar_t, NOUT, NIN>(op, out[0]->device().index(),
                                                  at::cuda::getCurrentCUDAStream(out[0]->device().index()), sizes,
                                                  out_ptrs, out_strides, in_ptrs, in_strides, f);
}

// One output: f returns a scalar_t.
template <typename scalar_t, int NIN, typename Func>
void launch_elementwise(std::string_view op, c10::DeviceIndex device, cudaStream_t stream, c10::ArrayRef<int64_t> sizes,
                        scalar_t* out, c10::ArrayRef<int64_t> out_strides, const std::array<const scalar_t*, NIN>& in,
                        const std::array<c10::ArrayRef<int64_t>, NIN>& in_strides, Func f) {
  launch_elementwise_outputs<scalar_t, 1, NIN>(op, device, stream, sizes, {out}, {out_strides}, in, in_strides, f);
}

}  // namespace backplane::cuda
