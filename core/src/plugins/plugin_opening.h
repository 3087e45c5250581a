// Opening a plugin that passed its checks (plugin_inspection.h): its fragment's ops are
// defined, the library is dlopen'ed while it counts as the plugin loading (its kernels
// register through the core then), and what it registered is audited. Also the one
// process-wide state opening leaves: which plugins were opened, and whether a throw
// through dlopen has made opening any more unsafe. Not thread-safe: the loader's mutex
// guards it. Internal to the core.
#pragma once

#include <backplane/loader.h>
#include <backplane/plugin/vendor_ops.h>

#include <optional>
#include <set>
#include <string>

namespace backplane::detail {

class PluginOpener {
 public:
  // Opens the plugin of `record` (status Available, as inspect_plugin gave it with
  // `fragment`). Returns it Loaded, with the ops it registered, or Rejected or Failed
  // with why. Never closes a library, whatever went wrong.
  BackendRecord open(BackendRecord record, const std::optional<Fragment>& fragment);

  // The same for a plugin of another kind (record as with_kind_target gave it, Available):
  // its fragment's ops are defined, then its opener offers its kernels while it counts as
  // loading (plugin_kind_opening.cpp).
  BackendRecord open_kind(BackendRecord record, const KindOpener& opener, const std::optional<Fragment>& fragment);

  // Whether `name` was dlopen'ed in this process: reopening would return the same handle
  // without running its registrations again, so it would pass for loaded.
  bool opened(const std::string& name) const { return opened_.count(name) > 0; }

 private:
  BackendRecord threw_while_opening(BackendRecord& record, const std::string& why);
  // Defines `fragment`'s ops, before any kernel of the plugin registers for them; false,
  // with `record` Rejected and why, where define_fragment refuses them.
  static bool define_own_ops(BackendRecord& record, const std::optional<Fragment>& fragment);

  std::set<std::string> opened_;
  std::string poisoned_;  // why no plugin may be opened any more (threw_while_opening)
};

}  // namespace backplane::detail
