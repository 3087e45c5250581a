// Which instruction set the CPU kernels use in this process.
#pragma once

namespace backplane::cpu {

enum class Capability { Default, Avx2, Avx512 };

// The best the processor supports, capped by BACKPLANE_CPU_CAPABILITY
// (default | avx2 | avx512) when set, e.g. to compare variants in a benchmark.
Capability capability();
const char* capability_name(Capability c);

}  // namespace backplane::cpu
