// Versions a plugin is checked against before it is opened.
#pragma once

#include <backplane/export.h>

#include <string>

namespace backplane {

// Bumped when the contract between core and plugins changes incompatibly (what a
// plugin may assume of the core's exported functions and of the registry).
inline constexpr int kPluginAbi = 1;

// "2.14": the torch this core was built against. Plugins must match major.minor,
// because libtorch's C++ API has no stable ABI across minor releases.
BACKPLANE_API std::string torch_major_minor();
// Whether this core was built with _GLIBCXX_USE_CXX11_ABI=1.
BACKPLANE_API bool cxx11_abi();
// Backplane's own version ("0.1.0").
BACKPLANE_API std::string core_version();

}  // namespace backplane
