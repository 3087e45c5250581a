// Finding plugin files by name (plugin_discovery.h).
#include "plugins/plugin_discovery.h"

#include <backplane/loader.h>
#include "plugins/manifest.h"

#include "util/posix_files.h"

#include <algorithm>

namespace backplane::detail {

std::optional<std::string> find_plugin(const std::string& name, const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    const std::string candidate = join_path(dir, plugin_file_name(name));
    if (file_exists(candidate)) return candidate;
  }
  return std::nullopt;
}

std::map<std::string, std::string> discover_plugins(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> found;
  const std::string prefix = "libbackplane_", suffix = ".so";
  for (const auto& dir : dirs) {
    std::vector<std::string> files = list_dir(dir);
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string name = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
      if (is_valid_backend_name(name) && !found.count(name)) found[name] = join_path(dir, file);
    }
  }
  return found;
}

}  // namespace backplane::detail
