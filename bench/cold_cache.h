// --cold-l2: a cuda row's samples start with the device's L2 cache holding none of the
// row's inputs, as nvbench's cold measurements do, and as a kernel runs in a model whose
// neighbouring ops have moved other data through the cache since. Without it, a row calls
// the op on the same inputs back to back, and inputs smaller than L2 are read from L2.
//
// The flush writes a buffer of twice the L2 size (the size from the device, through the
// CUDA module: cuda_module.h): every line of the cache then holds the buffer. It runs on
// the current stream, queued ahead of the timed call and outside its events; each sample
// is then one call (the calls after the first would find the inputs in L2 again).
// Limits: CUDA only: CPU rows and other devices' rows are timed as without the flag (a
// CPU's caches are not flushed). The flush leaves L1 and the TLBs cold as well.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>

namespace backplane::bench {

// The L2 cache of a CUDA device in bytes. Throws std::runtime_error naming why (the CUDA
// module missing, or the device's answer).
int64_t cuda_l2_bytes(c10::Device device);

// A function that flushes `device`'s L2 cache (a write of 2 x cuda_l2_bytes on the current
// stream), holding its buffer. Throws std::runtime_error where `device` is not CUDA or its
// L2 size is unknown.
std::function<void()> l2_flush(c10::Device device);

}  // namespace backplane::bench
