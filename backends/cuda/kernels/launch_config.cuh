// Grid sizing. Elementwise kernels take one tile per block (blocks_for); row kernels
// (softmax) take a block per row when rows are many (many_rows), else a grid of exactly
// the blocks that fit on the device at once (occupancy x multiprocessors) and loop over
// rows. The device's numbers are read once per device (and per kernel) and cached, so a
// launch costs no driver query after the first.
#pragma once

#include <c10/core/Device.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAMacros.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>

namespace backplane::cuda {

constexpr int kWarpSize = 32;
// CUDA's limit on a block's threads.
constexpr int kMaxBlockThreads = 1024;

// 8 warps: enough to hide a block's barrier, small enough for 8 resident blocks per SM.
constexpr int kBlockThreads = 256;

// gridDim.x limit.
constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();

// One int per device, computed on first use; 0 means not yet known. Two threads that
// race compute the same value, so a plain atomic store is enough.
class PerDeviceCache {
 public:
  template <typename Compute>
  int get(c10::DeviceIndex device, Compute compute) {
    std::atomic<int>& slot = values_.at(static_cast<size_t>(device));
    int v = slot.load(std::memory_order_relaxed);
    if (v == 0) {
      v = compute();
      slot.store(v, std::memory_order_relaxed);
    }
    return v;
  }

 private:
  std::array<std::atomic<int>, C10_COMPILE_TIME_MAX_GPUS> values_{};
};

// A device attribute (at least 1), read from the driver once per device.
template <cudaDeviceAttr kAttribute>
int device_attribute(c10::DeviceIndex device) {
  static PerDeviceCache cache;
  return cache.get(device, [device] {
    int n = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, kAttribute, device));
    return std::max(n, 1);
  });
}

inline int multiprocessor_count(c10::DeviceIndex device) {
  return device_attribute<cudaDevAttrMultiProcessorCount>(device);
}

// Threads the whole device holds at once (2048 a multiprocessor on an H100).
inline int64_t resident_threads(c10::DeviceIndex device) {
  return static_cast<int64_t>(device_attribute<cudaDevAttrMaxThreadsPerMultiProcessor>(device)) *
         multiprocessor_count(device);
}

// Blocks for a kernel that loops over `rows` rows: the blocks of `threads` threads (whole
// warps) of Kernel resident on the whole device at once, at most one a row. The occupancy
// is read from the driver once per kernel, thread count and device. The current device
// must be `device` (the caller holds a CUDAGuard).
template <auto Kernel>
int64_t resident_row_blocks(c10::DeviceIndex device, int threads, int64_t rows) {
  static std::array<PerDeviceCache, kMaxBlockThreads / kWarpSize + 1> cache;
  const int blocks = cache.at(static_cast<size_t>(threads / kWarpSize)).get(device, [&] {
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0));
    return std::max(per_sm, 1) * multiprocessor_count(device);
  });
  return std::min<int64_t>(rows, blocks);
}

// Whether rows are many enough (at least 4 a multiprocessor) that a block per row beats a
// grid of the resident blocks looping over rows: the block scheduler then overlaps one
// block's reductions with the next one's loads (softmax and its backward; see
// bench/results/).
inline bool many_rows(int64_t rows, c10::DeviceIndex device) {
  constexpr int kManyRowsPerMultiprocessor = 4;
  return rows >= static_cast<int64_t>(kManyRowsPerMultiprocessor) * multiprocessor_count(device);
}

// Blocks for `items` work items of `per_block` each: at least 1, at most `cap`.
inline int64_t blocks_for(int64_t items, int64_t per_block, int64_t cap) {
  return std::clamp<int64_t>((items + per_block - 1) / per_block, 1, cap);
}

}  // namespace backplane::cuda
