// The plugin being opened, and its registrations against its manifest (plugin_loading.h).
#include "plugins/plugin_loading.h"

#include <algorithm>

namespace backplane::detail {
namespace {

thread_local LoadingPlugin* loading = nullptr;

}  // namespace

LoadingScope::LoadingScope(LoadingPlugin* plugin) : previous_(loading) { loading = plugin; }
LoadingScope::~LoadingScope() { loading = previous_; }

LoadingPlugin* loading_plugin() { return loading; }

const OpDef* admit_registration(LoadingPlugin& plugin, const char* name, c10::DispatchKey key) {
  const OpDef* def = find_op_def(name);
  if (def == nullptr) {  // a vendor op whose fragment was never defined
    plugin.violations.push_back("registers " + std::string(name) +
                                ", which neither the registry nor its manifest's registry fragment defines");
    return nullptr;
  }
  const std::string key_name = c10::toString(key);
  if (key_name != plugin.dispatch_key) {
    plugin.violations.push_back("registers " + def->qualified_name() + " for " + key_name +
                                ", but its manifest declares dispatch key " + plugin.dispatch_key);
    return nullptr;
  }
  if (std::find(plugin.ops.begin(), plugin.ops.end(), def->id()) == plugin.ops.end()) {
    plugin.violations.push_back("registers " + def->qualified_name() + ", which its manifest does not list");
    return nullptr;
  }
  return def;
}

}  // namespace backplane::detail
