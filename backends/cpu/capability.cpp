#include "capability.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

namespace backplane::cpu {

Capability processor_capability() {
  static const Capability detected = [] {
    __builtin_cpu_init();
    // The AVX512 variant is built with -mavx512f/bw/vl/dq, so all four are needed.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return Capability::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Capability::Avx2;
    return Capability::Default;
  }();
  return detected;
}

std::optional<Capability> requested_capability() {
  static const std::optional<Capability> requested = []() -> std::optional<Capability> {
    const char* env = std::getenv("BACKPLANE_CPU_CAPABILITY");
    if (env == nullptr) return std::nullopt;
    const std::string want = env;
    Capability asked;
    if (want == "default") asked = Capability::Default;
    else if (want == "avx2") asked = Capability::Avx2;
    else if (want == "avx512") asked = Capability::Avx512;
    else {
      TORCH_WARN("BACKPLANE_CPU_CAPABILITY='", want,
                 "' is not one of default, avx2, avx512; each CPU kernel uses its own choice");
      return std::nullopt;
    }
    // Never run code the processor cannot execute.
    const Capability best = processor_capability();
    return static_cast<int>(asked) <= static_cast<int>(best) ? asked : best;
  }();
  return requested;
}

const char* capability_name(Capability c) {
  switch (c) {
    case Capability::Avx512: return "avx512";
    case Capability::Avx2: return "avx2";
    default: return "default";
  }
}

}  // namespace backplane::cpu
