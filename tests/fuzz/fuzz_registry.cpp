// libFuzzer: registry YAML (ops). Any input must parse or raise RegistryError; a
// crash, hang, sanitizer report or other exception is a finding.
#include <backplane/registry.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    backplane::parse_registry(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  } catch (const backplane::RegistryError&) {
  }
  return 0;
}
