#include "kernel_variants.h"

#include <c10/util/Exception.h>

#include <array>
#include <map>
#include <mutex>
#include <string>

namespace backplane::cpu {
namespace {

struct Variants {
  std::array<AnyFunction, 3> fn{};  // indexed by Capability
  bool avx512_preferred = false;
};

// Built on first use: kernel files record their variants from static initializers,
// whose order across files is unspecified.
std::map<std::string, Variants>& variants() {
  static std::map<std::string, Variants> table;
  return table;
}
std::mutex& variants_mutex() {
  static std::mutex m;
  return m;
}

// The widest instruction set op should run, before falling back to what was built.
Capability wanted(const Variants& v) {
  if (const auto requested = requested_capability()) return *requested;
  const Capability best = processor_capability();
  return best == Capability::Avx512 && !v.avx512_preferred ? Capability::Avx2 : best;
}

}  // namespace

bool add_variant(const char* op, Capability capability, AnyFunction fn, bool preferred) {
  std::lock_guard<std::mutex> lock(variants_mutex());
  Variants& v = variants()[op];
  v.fn[static_cast<int>(capability)] = fn;
  if (capability == Capability::Avx512) v.avx512_preferred = preferred;
  return true;
}

AnyFunction selected_variant(const char* op) {
  std::lock_guard<std::mutex> lock(variants_mutex());
  auto it = variants().find(op);
  TORCH_CHECK(it != variants().end(), "backplane cpu plugin: no kernel recorded for '", op, "'");
  const Variants& v = it->second;
  for (int c = static_cast<int>(wanted(v)); c >= 0; --c)
    if (v.fn[c] != nullptr) return v.fn[c];
  TORCH_CHECK(false, "backplane cpu plugin: '", op, "' has no kernel for ", capability_name(wanted(v)),
              " or a narrower instruction set");
}

}  // namespace backplane::cpu
