#include "kernel_variants.h"

#include <c10/util/Exception.h>

#include <array>
#include <map>
#include <mutex>
#include <string>

namespace backplane::cpu {
namespace {

using Variants = std::array<AnyFunction, 3>;  // indexed by Capability

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

}  // namespace

bool add_variant(const char* op, Capability capability, AnyFunction fn) {
  std::lock_guard<std::mutex> lock(variants_mutex());
  variants()[op][static_cast<int>(capability)] = fn;
  return true;
}

AnyFunction selected_variant(const char* op) {
  std::lock_guard<std::mutex> lock(variants_mutex());
  auto it = variants().find(op);
  TORCH_CHECK(it != variants().end(), "backplane cpu plugin: no kernel recorded for '", op, "'");
  for (int c = static_cast<int>(capability()); c >= 0; --c)
    if (it->second[c] != nullptr) return it->second[c];
  TORCH_CHECK(false, "backplane cpu plugin: '", op, "' has no kernel for ", capability_name(capability()),
              " or a narrower instruction set");
}

}  // namespace backplane::cpu
