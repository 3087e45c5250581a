// Which plugin served each backplane op when a package was made (the record
// `<archive>/extra/backplane_plugins.txt`, written by python/backplane/aoti/plugins.py, whose
// docstring gives the format), and the check `backplane run` makes before the package
// runs: two plugins may compute one op differently, and the package calls whichever this
// process chose. Refused, unless --allow-plugin-change (the same rule as
// backplane.load_package; change both together):
// - a recorded op now served by another plugin, or another split by size, than recorded;
// - for a package without the record, an op it calls that two loaded plugins offer on its
//   device with nothing choosing between them (the one loaded first serves it).
#pragma once

#include "aoti/package_check.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace backplane::cli {

struct PluginRecord {
  std::vector<std::array<std::string, 3>> rows;  // op, dispatch_key, plugin ("cpu_alt<=4096,cpu": split by size)
  std::string selection_digest;                  // sha256 of the selection file that split an op; empty: none did
  std::string selection_path;                    // where that file was; empty when unknown
};

struct PluginCheck {
  std::vector<std::string> notes;    // one per op checked: who serves it here
  std::vector<std::string> refused;  // one per op refused: why, and the flags that run it as made
};

// nullopt for a package without the record. Throws std::runtime_error naming the line of
// a malformed record.
std::optional<PluginRecord> read_plugin_record(const std::string& package);

// The check above, for the package whose device and ops `needs` gives (package_needs).
PluginCheck check_package_plugins(const std::string& package, const PackageNeeds& needs);

}  // namespace backplane::cli
