// Which instruction set the CPU kernels use in this process.
#pragma once

#include <optional>

namespace backplane::cpu {

enum class Capability { Default, Avx2, Avx512 };

// The widest the processor supports.
Capability processor_capability();

// BACKPLANE_CPU_CAPABILITY (default | avx2 | avx512), capped by the processor: the one
// instruction set every kernel then uses, e.g. to compare builds in a benchmark. nullopt
// when unset (or not one of the three, with a warning): each kernel takes its own choice
// (kernel_variants.h).
std::optional<Capability> requested_capability();

const char* capability_name(Capability c);

}  // namespace backplane::cpu
