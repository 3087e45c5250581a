// The registry YAML text, embedded at build time (see cmake/EmbedRegistry.cmake).
#pragma once

#include <vector>

namespace backplane::detail {

struct RegistrySource {
  const char* file;  // path relative to the source tree, for error messages
  const char* text;
};

const std::vector<RegistrySource>& registry_sources();

}  // namespace backplane::detail
