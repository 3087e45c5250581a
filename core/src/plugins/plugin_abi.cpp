#include <backplane/plugin_abi.h>

#include <torch/version.h>

namespace backplane {

std::string torch_major_minor() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
}

bool cxx11_abi() { return _GLIBCXX_USE_CXX11_ABI != 0; }

std::string core_version() { return BACKPLANE_VERSION; }

}  // namespace backplane
