// 1 / sqrt(mean of squares + eps) for one row: rms_norm's scale, and its backward's.
#pragma once

#include <cstdint>
#include <type_traits>

namespace backplane::cuda {

template <typename acc_t>
__device__ __forceinline__ acc_t inv_rms(acc_t sum_squares, int64_t n, acc_t eps) {
  const acc_t mean = sum_squares / static_cast<acc_t>(n) + eps;
  if constexpr (std::is_same_v<acc_t, double>)
    return 1.0 / ::sqrt(mean);
  else
    return 1.0f / ::sqrtf(mean);
}

}  // namespace backplane::cuda
