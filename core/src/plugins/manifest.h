// The manifest that sits beside each plugin (libbackplane_<name>.manifest.yaml).
// The build writes it (backplane_manifest); the loader reads it before dlopen,
// because TORCH_LIBRARY_IMPL registers kernels during dlopen and a check after
// that is too late.
#pragma once

#include <backplane/export.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

struct BACKPLANE_API Manifest {
  // What the plugin is. "shared_library" (the default, and what a manifest without `kind`
  // is): libbackplane_<name>.so beside this file, opened with dlopen. "triton": no library;
  // its kernels are Python launchers that its package (python_module) returns from
  // kernels(), offered to the core by the Python bridge (python/src/python_kernels.cpp).
  // A triton manifest has name, version, dispatch_key (CUDA), python_module (python_path
  // optional), ops, the ranges `triton` and `torch`, and `registry` where it brings ops of
  // its own; none of the library's keys (torch_version, cxx11_abi, torch_abi, registration).
  std::string kind = "shared_library";
  std::string triton_versions;  // kind triton: the Triton releases it runs under (version_range.h)
  std::string torch_versions;   // kind triton: the torch releases it runs under
  int plugin_abi = 0;
  std::string name;          // "cpu"
  std::string version;       // the plugin's version
  std::string dispatch_key;  // "CPU", "CUDA", "PrivateUse1"
  std::string torch_version; // major.minor it was built against, "2.14" (stable: the oldest it targets)
  bool cxx11_abi = true;      // _GLIBCXX_USE_CXX11_ABI (not checked for a stable plugin: C calls only)
  // "full": built on libtorch's C++ API; it runs under torch torch_version only, the core
  // checks that exactly. "stable": its kernels use only PyTorch's stable ABI
  // (torch/csrc/stable, the C shim), built with TORCH_TARGET_VERSION = torch_version; it
  // runs under that torch or any later one.
  std::string torch_abi = "full";
  std::vector<std::string> ops;  // ops it registers kernels for
  // "core": its kernels register through BACKPLANE_KERNEL, so it can share a device with
  // another plugin (the core chooses per op). "direct": plain m.impl; it is refused where
  // another plugin already serves one of its (op, key), since it would silently override.
  std::string registration = "core";
  // The plugin's Python side (device module, helpers), optional: a package named
  // python_module in python_path (relative to the manifest's directory; empty: importable
  // by name, as a plugin wheel's own package is), imported by backplane.load() once the
  // library is open.
  std::string python_module;
  std::string python_path;
  // The plugin's own ops (vendor_ops.h): a registry fragment, relative to the manifest's
  // directory (either kind); empty: the plugin implements core registry ops only. Its ops
  // appear in `ops` by id ("acme::fused_gelu").
  std::string registry;
  // The CMake build type it was compiled under ("Release", "Debug", ...; "none" when no
  // CMAKE_BUILD_TYPE was given: the compiler's defaults, unoptimised); empty in a manifest
  // written before the key existed. Not checked by the loader: `backplane bench` reads it
  // to warn when it times an unoptimised plugin (unoptimised_build_type).
  std::string build_type;
};

// Why a plugin of `build_type` times slow ("a Debug build", "built with no CMAKE_BUILD_TYPE"),
// or nullopt for an optimised build type (Release, RelWithDebInfo, MinSizeRel) or an
// unknown one (an empty build_type: an older manifest).
BACKPLANE_API std::optional<std::string> unoptimised_build_type(const std::string& build_type);

// "2.14" -> (2, 14); nullopt for anything but two whole numbers and a dot.
BACKPLANE_API std::optional<std::pair<int, int>> major_minor(const std::string& version);

// Throws std::runtime_error naming the file (and line:column) on a bad manifest.
BACKPLANE_API Manifest read_manifest(const std::string& path);
BACKPLANE_API std::string manifest_to_yaml(const Manifest& manifest);

// Why this manifest cannot be loaded by this core, naming both sides' versions;
// nullopt when it can. A full-ABI plugin: the same torch major.minor and C++ ABI flag as
// this process. A stable-ABI plugin: this torch is its torch_version or later. A triton
// plugin: this torch lies in its `torch` range (Triton's range is Python's to check).
BACKPLANE_API std::optional<std::string> manifest_incompatibility(const Manifest& manifest, const std::string& expected_name);

// libbackplane_<name>.so and libbackplane_<name>.manifest.yaml
BACKPLANE_API std::string plugin_file_name(const std::string& backend);
BACKPLANE_API std::string manifest_file_name(const std::string& backend);

}  // namespace backplane
