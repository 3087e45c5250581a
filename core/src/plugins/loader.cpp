// Loading plugins: the contract in docs/ARCHITECTURE.md ("The plugin contract").
#include <backplane/loader.h>
#include "plugins/manifest.h"

#include "plugins/kind_openers.h"
#include "plugins/plugin_discovery.h"
#include "plugins/plugin_inspection.h"
#include "plugins/plugin_opening.h"
#include "util/posix_files.h"
#include "util/strings.h"

#include <map>
#include <mutex>

namespace backplane {

const char* to_string(BackendStatus status) {
  switch (status) {
    case BackendStatus::Loaded: return "loaded";
    case BackendStatus::Available: return "available";
    case BackendStatus::Rejected: return "rejected";
    case BackendStatus::Failed: return "failed";
    case BackendStatus::Unavailable: return "unavailable";
  }
  return "unknown";
}

namespace {

using detail::join;

// Which backend is loaded, failed or rejected, and the calls that change that; each call
// holds the one mutex. Discovery, the checks before opening and dlopen itself are each
// their own file (plugin_discovery.h, plugin_inspection.h, plugin_opening.h).
class Loader {
 public:
  BackendRecord load(const std::string& name, const LoadOptions& options) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!is_valid_backend_name(name))
      throw BackendError("invalid backend name '" + name +
                         "': expected a plain identifier ([A-Za-z_][A-Za-z0-9_]*); paths, '/' and '..' are refused");
    const std::vector<std::string> dirs = plugin_search_path(options);
    const std::optional<std::string> found = detail::find_plugin(name, dirs);
    auto known = records_.find(name);
    if (known != records_.end() && known->second.status == BackendStatus::Loaded) {
      if (found && detail::real_path(*found) != known->second.path)
        throw BackendError("backend '" + name + "' is already loaded from " + known->second.path +
                           "; refusing to load a second copy from " + detail::real_path(*found));
      return known->second;
    }
    if (!found)
      throw BackendError("backend '" + name + "' not found: looked for " + plugin_file_name(name) + " in [" +
                         join(dirs) + "]" + available_hint(dirs) +
                         ". Set BACKPLANE_PLUGIN_PATH or pass a directory.");
    // A plugin that failed after dlopen stays failed: reopening returns the same handle
    // without running its registrations again, so it would pass for loaded.
    if (known != records_.end() && opener_.opened(name))
      throw BackendError("backend '" + name + "' " + to_string(known->second.status) + " (" + known->second.path +
                         "): " + known->second.reason);
    BackendRecord record = open(name, *found);
    records_[name] = record;
    if (record.status != BackendStatus::Loaded)
      throw BackendError("backend '" + name + "' " + to_string(record.status) + " (" + record.path + "): " +
                         record.reason);
    return record;
  }

  std::vector<BackendRecord> load_discovered(const LoadOptions& options) {
    {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      for (const auto& [name, path] : detail::discover_plugins(plugin_search_path(options))) {
        auto known = records_.find(name);
        if (known != records_.end() && (known->second.status == BackendStatus::Loaded || opener_.opened(name)))
          continue;
        records_[name] = open(name, path);
      }
    }
    return backends(options);
  }

  std::vector<BackendRecord> backends(const LoadOptions& options) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::map<std::string, BackendRecord> all = records_;
    for (const auto& [name, path] : detail::discover_plugins(plugin_search_path(options)))
      if (!all.count(name) || all[name].status == BackendStatus::Unavailable) all[name] = inspect(name, path, false);
    std::vector<BackendRecord> out;
    for (auto& [_, record] : all) out.push_back(std::move(record));
    return out;
  }

 private:
  static std::string available_hint(const std::vector<std::string>& dirs) {
    std::vector<std::string> names;
    for (const auto& [name, _] : detail::discover_plugins(dirs)) names.push_back(name);
    return names.empty() ? "; no plugins there" : "; found plugins: " + join(names);
  }

  // inspect_plugin, and for a plugin that is no library, where it can serve here
  // (kind_openers.h): Unavailable where it cannot. `opening`: for a load; a listing runs
  // none of the plugin's code.
  BackendRecord inspect(const std::string& name, const std::string& plugin_path, bool opening,
                        std::optional<Fragment>* fragment = nullptr) {
    BackendRecord record = detail::inspect_plugin(name, plugin_path, records_, fragment);
    if (record.status == BackendStatus::Available && record.kind != "shared_library")
      record = detail::with_kind_target(std::move(record), opening);
    return record;
  }

  BackendRecord open(const std::string& name, const std::string& plugin_path) {
    std::optional<Fragment> fragment;
    BackendRecord record = inspect(name, plugin_path, true, &fragment);
    if (record.status != BackendStatus::Available) return record;
    if (record.kind != "shared_library") {
      const std::optional<detail::KindOpener> kind = detail::find_kind_opener(record.kind);
      return opener_.open_kind(std::move(record), *kind, fragment);  // with_kind_target found it
    }
    return opener_.open(std::move(record), fragment);
  }

  // Recursive: a plugin's static initializer may call back into the loader while
  // dlopen holds it (it runs on the loading thread).
  std::recursive_mutex mutex_;
  std::map<std::string, BackendRecord> records_;
  detail::PluginOpener opener_;
};

Loader& loader() {
  static Loader* instance = new Loader();  // never destroyed: plugins outlive static destruction
  return *instance;
}

}  // namespace

BackendRecord load(const std::string& name, const LoadOptions& options) { return loader().load(name, options); }

std::vector<BackendRecord> load(const std::vector<std::string>& names, const LoadOptions& options) {
  std::vector<BackendRecord> out;
  for (const auto& name : names) out.push_back(load(name, options));
  return out;
}

std::vector<BackendRecord> load(std::initializer_list<std::string> names, const LoadOptions& options) {
  return load(std::vector<std::string>(names), options);
}

std::vector<BackendRecord> load_discovered(const LoadOptions& options) { return loader().load_discovered(options); }

std::vector<BackendRecord> backends(const LoadOptions& options) { return loader().backends(options); }

}  // namespace backplane
