// Which plugin served each backplane op when a package was made (recorded by
// python/backplane/package_plugins.py as `<archive>/extra/backplane_plugins.txt`), and
// the check `backplane run` makes against the plugins serving each op in this process:
// two plugins may compute one op differently, so another one is refused unless allowed.
#pragma once

#include <string>
#include <vector>

namespace backplane::cli {

struct PluginCheck {
  std::vector<std::string> notes;     // one per recorded op: who serves it here
  std::vector<std::string> mismatch;  // ops now served by another plugin than recorded
};

// Empty notes for a package without the record. Throws std::runtime_error naming the
// line of a malformed record.
PluginCheck check_package_plugins(const std::string& package);

}  // namespace backplane::cli
