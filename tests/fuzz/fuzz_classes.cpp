// libFuzzer: registry YAML with custom classes, through the cross-file check that
// methods call existing ops (check_classes). Only RegistryError may come out.
#include <backplane/registry.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    backplane::Registry r = backplane::parse_registry(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
    r.check_classes();
  } catch (const backplane::RegistryError&) {
  }
  return 0;
}
