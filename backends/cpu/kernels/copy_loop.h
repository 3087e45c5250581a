// out = in, bit for bit (no arithmetic touches the values).
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/native/cpu/Loops.h>

#include <cstring>

namespace backplane::cpu::CPU_CAPABILITY {

// Any layout, through a TensorIterator.
inline void copy_loop(at::TensorIteratorBase& iter) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "backplane_copy", [&] {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t v) -> scalar_t { return v; },
        [](at::vec::Vectorized<scalar_t> v) { return v; });
  });
}

// Contiguous to contiguous: memcpy in parallel chunks (libc's copy is faster than a
// vector loop: see bench/results/).
inline void copy_contiguous(void* dst, const void* src, int64_t bytes) {
  constexpr int64_t kGrain = 256 * 1024;  // bytes per task
  at::parallel_for(0, bytes, kGrain, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY
