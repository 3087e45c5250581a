// Which plugin files the search path holds (plugin_search_path in loader.h gives the
// directories). Looks at file names only: nothing here opens or reads a plugin.
// Internal to the core.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

// The path of name's plugin file in the first directory of `dirs` holding one;
// nullopt when none does. A plugin file is libbackplane_<name>.so, or, in a directory
// without that library, its manifest libbackplane_<name>.manifest.yaml alone: a plugin
// that is no library (manifest kind: triton, a Python package). Which kind a lone
// manifest is, inspection reads (plugin_inspection.h).
std::optional<std::string> find_plugin(const std::string& name, const std::vector<std::string>& dirs);

// name -> path of every plugin file (as find_plugin) in `dirs` whose name is a valid
// backend name; the first directory that has a name wins. Each directory's listing is
// sorted, so every file system gives the same answer.
std::map<std::string, std::string> discover_plugins(const std::vector<std::string>& dirs);

}  // namespace backplane::detail
