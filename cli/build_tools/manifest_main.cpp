// backplane_manifest: run by the build right after a plugin links. Opens the plugin
// in this (separate) process, asks the dispatcher which registry ops now have a
// kernel for the plugin's dispatch key, and writes the manifest the loader reads
// before it opens the plugin in a user's process. A plugin with its own ops names its
// registry fragment (--registry, checked here, so a bad one fails the build with its
// file:line) and the name the fragment has beside the plugin (--registry-name).
#include <backplane/plugin/kernel.h>
#include <backplane/loader.h>
#include "plugins/manifest.h"
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>
#include <backplane/plugin/vendor_ops.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dlfcn.h>

#include <fstream>
#include <iostream>
#include <map>

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required : {"--plugin", "--name", "--key", "--version", "--out"}) {
    if (!args.count(required)) {
      std::cerr << "usage: backplane_manifest --plugin P --name N --key K --version V --out F [--python-module M --python-path DIR] [--registry YAML --registry-name FILE] [--torch-target X.Y: a stable-ABI plugin] [--build-type T] (missing " << required
                << ")\n";
      return 2;
    }
  }
  if (args.count("--registry")) {
    try {  // its own ops must exist before its kernels register for them
      backplane::define_fragment(backplane::read_fragment(args["--registry"]), args["--name"]);
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  const std::size_t before = backplane::detail::core_registrations();
  void* handle = dlopen(args["--plugin"].c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::cerr << "backplane_manifest: cannot open " << args["--plugin"] << ": " << dlerror() << "\n";
    return 1;
  }
  // A stable-ABI plugin (stable_kernel.h) offers its kernels when the core asks.
  const bool stable = args.count("--torch-target") > 0;
  if (stable) {
    if (auto why = backplane::detail::init_stable_plugin(handle)) {
      std::cerr << "backplane_manifest: " << args["--plugin"] << ": " << *why << "\n";
      return 1;
    }
  }
  const c10::DispatchKey key = c10::parseDispatchKey(args["--key"]);
  backplane::Manifest manifest;
  manifest.plugin_abi = backplane::kPluginAbi;
  manifest.name = args["--name"];
  manifest.version = args["--version"];
  manifest.dispatch_key = c10::toString(key);
  manifest.torch_version = stable ? args["--torch-target"] : backplane::torch_major_minor();
  manifest.torch_abi = stable ? "stable" : "full";
  manifest.cxx11_abi = backplane::cxx11_abi();
  if (stable && !backplane::major_minor(manifest.torch_version)) {
    std::cerr << "backplane_manifest: --torch-target: expected torch major.minor such as 2.13, found '"
              << manifest.torch_version << "'\n";
    return 2;
  }
  if (args.count("--python-module")) {
    manifest.python_module = args["--python-module"];
    if (args.count("--python-path")) manifest.python_path = args["--python-path"];
  }
  // The build type the plugin was compiled under, for `backplane bench`'s warning.
  if (args.count("--build-type")) manifest.build_type = args["--build-type"];
  if (args.count("--registry")) manifest.registry = args.count("--registry-name") ? args["--registry-name"] : "";
  std::vector<std::string> missing;
  for (const backplane::OpDef& op : backplane::all_ops()) {
    auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(op.qualified_name(), ""));
    if (handle && handle->hasKernelForDispatchKey(key))
      manifest.ops.push_back(op.id());
    else
      missing.push_back(op.id());
  }
  // Every kernel through the core (BACKPLANE_KERNEL), or some registered directly.
  const std::size_t through_core = backplane::detail::core_registrations() - before;
  manifest.registration = through_core >= manifest.ops.size() ? "core" : "direct";
  std::ofstream(args["--out"]) << backplane::manifest_to_yaml(manifest);
  // A vendor sees at build time which ops their backend still lacks.
  if (!missing.empty()) {
    std::cout << "backend '" << manifest.name << "' has no " << manifest.dispatch_key << " kernel for:";
    for (const auto& op : missing) std::cout << " " << op;
    std::cout << "\n";
  }
  return 0;
}
