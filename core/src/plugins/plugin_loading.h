// What the loader tells the registration path (kernel.h's offer_kernel) about the
// plugin it is opening, and what it learns back. Internal to the core.
#pragma once

#include <backplane/registry.h>

#include <c10/core/DispatchKey.h>

#include <string>
#include <vector>

namespace backplane::detail {

struct LoadingPlugin {
  std::string name;
  std::string dispatch_key;      // as its manifest declares
  std::vector<std::string> ops;  // as its manifest declares
  std::vector<std::string> offered;     // ops it registered through the core
  std::vector<std::string> violations;  // registrations its manifest does not declare (refused)
};

// Marks `plugin` as the one being opened on this thread for the scope's lifetime.
class LoadingScope {
 public:
  explicit LoadingScope(LoadingPlugin* plugin);
  ~LoadingScope();
  LoadingScope(const LoadingScope&) = delete;
  LoadingScope& operator=(const LoadingScope&) = delete;

 private:
  LoadingPlugin* previous_;
};

// The plugin being opened on this thread; nullptr outside a LoadingScope (a library
// opened by the manifest tool or torch.ops.load_library).
LoadingPlugin* loading_plugin();

// The manifest's side of a registration the plugin being opened makes through the core
// (kernel.h): the op's definition when its manifest declares that op on that key; else
// nullptr, with what it did recorded in plugin.violations (the registration is refused).
const OpDef* admit_registration(LoadingPlugin& plugin, const char* name, c10::DispatchKey key);

// After a plugin's dlopen: installs the selecting kernel for every (op, key) that now
// has offers from two plugins, and warns once about each such conflict that no
// preference resolves.
void after_plugin_loaded(const std::string& plugin);

// The key under which a preference or a selection file names an op: its id ("add" for
// "backplane::add"); a plugin's own op (ns::name) not defined yet is kept as written, and
// applies once its plugin loads. Throws std::invalid_argument, naming the op, for one the
// registry lacks or a name that is not an op name.
std::string chosen_op_id(const std::string& op);

// A plugin that failed after dlopen: its offers leave the per-op choice (a slot it alone
// served keeps its directly registered kernel: the failure reason says to restart).
void withdraw_offers(const std::string& plugin);

}  // namespace backplane::detail
