// Finding plugin files by name (plugin_discovery.h).
#include "plugins/plugin_discovery.h"

#include <backplane/loader.h>
#include "plugins/manifest.h"

#include "util/posix_files.h"

#include <algorithm>

namespace backplane::detail {

std::optional<std::string> find_plugin(const std::string& name, const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    const std::string library = join_path(dir, plugin_file_name(name));
    if (file_exists(library)) return library;
    const std::string manifest = join_path(dir, manifest_file_name(name));
    if (file_exists(manifest)) return manifest;
  }
  return std::nullopt;
}

namespace {

// The backend name in a file name `prefix` NAME `suffix`, or "" for another file.
std::string name_between(const std::string& file, const std::string& prefix, const std::string& suffix) {
  if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  return file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
}

}  // namespace

std::map<std::string, std::string> discover_plugins(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> found;
  const std::string prefix = "libbackplane_", library = ".so", manifest = ".manifest.yaml";
  for (const auto& dir : dirs) {
    std::vector<std::string> files = list_dir(dir);
    std::sort(files.begin(), files.end());
    std::map<std::string, std::string> here;
    for (const auto& file : files) {
      // A library wins over its manifest: the manifest beside a library is its own.
      if (std::string name = name_between(file, prefix, library); !name.empty())
        here[name] = join_path(dir, file);
      else if (std::string lone = name_between(file, prefix, manifest); !lone.empty() && !here.count(lone) &&
                                                                         !file_exists(join_path(dir, plugin_file_name(lone))))
        here[lone] = join_path(dir, file);
    }
    for (const auto& [name, path] : here)
      if (is_valid_backend_name(name) && !found.count(name)) found[name] = path;
  }
  return found;
}

}  // namespace backplane::detail
