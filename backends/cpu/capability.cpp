#include "capability.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

namespace backplane::cpu {

static Capability detect() {
  __builtin_cpu_init();
  // The AVX512 variant is built with -mavx512f/bw/vl/dq, so all four are needed.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return Capability::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Capability::Avx2;
  return Capability::Default;
}

Capability capability() {
  static const Capability chosen = [] {
    Capability best = detect();
    const char* env = std::getenv("BACKPLANE_CPU_CAPABILITY");
    if (env == nullptr) return best;
    const std::string want = env;
    Capability asked;
    if (want == "default") asked = Capability::Default;
    else if (want == "avx2") asked = Capability::Avx2;
    else if (want == "avx512") asked = Capability::Avx512;
    else {
      TORCH_WARN("BACKPLANE_CPU_CAPABILITY='", want, "' is not one of default, avx2, avx512; using ",
                 capability_name(best));
      return best;
    }
    // Never run code the processor cannot execute.
    return static_cast<int>(asked) <= static_cast<int>(best) ? asked : best;
  }();
  return chosen;
}

const char* capability_name(Capability c) {
  switch (c) {
    case Capability::Avx512: return "avx512";
    case Capability::Avx2: return "avx2";
    default: return "default";
  }
}

}  // namespace backplane::cpu
