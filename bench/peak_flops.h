// The device's peak arithmetic rate, measured in the run as copy_ rows measure its
// bandwidth: the %peak column is a row's FLOPs per call (the registry's `flops:` per element
// of the op's largest Tensor argument, times its elements) over its time, against this.
//   cpu:  FMA chains in vector registers on every ATen thread (peak_flops_cpu.cpp)
//   cuda: a kernel of FMA chains on every SM (cuda_peak_flops.cu, through cuda_module.h)
//   other devices: not measured (the column is blank)
// Each FMA counts 2 FLOPs. float32 and float64 are measured; float16 and bfloat16 rows are
// read against float32's rate: the kernels, and ATen's on the CPU, compute 16-bit inputs in
// float32 (their opmath dtype). Tensor cores and matrix units are not counted: no op of the
// registry is a matrix product.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace backplane::bench {

// The dtype whose FMA rate bounds rows of `dtype`: float64 for float64, else float32.
c10::ScalarType peak_dtype(c10::ScalarType dtype);

struct PeakRate {
  double flops_per_second = 0;
  std::string how;  // what ran, for the run's context: "avx512 FMA chains on 2 threads"
};

// Fused multiply-adds on `device` in `dtype` (float32 or float64). Throws
// std::runtime_error naming why the rate cannot be measured there.
PeakRate measure_peak_flops(c10::Device device, c10::ScalarType dtype);

// The CPU loop alone (peak_flops_cpu.cpp): FMA chains on `threads` threads, in the widest
// vectors the processor has (avx512, avx2 with fma, else portable code: a lower bound),
// the best of a few runs of about 20 ms each.
PeakRate cpu_peak_flops(c10::ScalarType dtype, int threads);

}  // namespace backplane::bench
