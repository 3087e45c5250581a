// out[i] = in[i] over a TensorIterator, bit for bit (no arithmetic touches the values).
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/native/cpu/Loops.h>

namespace backplane::cpu::CPU_CAPABILITY {

inline void copy_loop(at::TensorIteratorBase& iter) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "backplane_copy", [&] {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t v) -> scalar_t { return v; },
        [](at::vec::Vectorized<scalar_t> v) { return v; });
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY
