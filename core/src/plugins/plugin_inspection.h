// The checks a plugin passes before it is opened: its file, its manifest (manifest.h),
// its registry fragment of own ops (vendor_ops.h), and its dispatch key and ops against
// what this process has loaded already. Reads files; never opens the library.
// Internal to the core.
#pragma once

#include <backplane/loader.h>
#include <backplane/plugin/vendor_ops.h>

#include <map>
#include <optional>
#include <string>

namespace backplane::detail {

// The record of the plugin at `plugin_path`, status Available or Rejected (with why).
// `known` is the loader's records, name -> record: the loaded ones among them may hold
// the PrivateUse1 device or the kernels a plugin registering directly would override.
// `fragment_out`, when given, receives its parsed fragment (defined when it is opened),
// so the file is read and parsed once per load.
BackendRecord inspect_plugin(const std::string& name, const std::string& plugin_path,
                             const std::map<std::string, BackendRecord>& known,
                             std::optional<Fragment>* fragment_out = nullptr);

}  // namespace backplane::detail
