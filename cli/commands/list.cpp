// `backplane list`: every plugin on the search path, each loaded if it can be.
#include "cli.h"
#include "plugin_probe.h"

#include "c_api/json_writer.h"
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>

namespace backplane::cli {
namespace {

// Every plugin found, each opened in a child process first (plugin_probe.h): one whose
// initializer crashes or ends the process is listed as failed, and the others still load.
std::vector<BackendRecord> probe_and_load_discovered(const LoadOptions& options) {
  std::vector<BackendRecord> out;
  for (auto record : backends(options)) {
    if (record.status == BackendStatus::Available) {
      if (auto why = probe_in_child(record.name, options)) {
        record.status = BackendStatus::Failed;
        record.reason = *why;
        out.push_back(record);
        continue;
      }
      try {
        load(record.name, options);
      } catch (const BackendError&) {
        // recorded by the loader: listed below with its reason
      }
    }
    out.push_back(record);
  }
  // The loader's records for the ones it opened (status, reason, the ops they registered).
  const auto now = backends(options);
  for (auto& r : out)
    for (const auto& n : now)
      if (n.name == r.name && r.status != BackendStatus::Failed) r = n;
  return out;
}

}  // namespace

int list_command(const Options& options) {
  const bool discovering = !options.backends && !std::getenv("BACKPLANE_BACKENDS");
  const auto records = discovering ? probe_and_load_discovered(options.load) : load_selected(options);
  if (discovering) apply_selection_loaded(options);  // load_selected does it itself
  if (options.json) {
    std::vector<std::string> rows;
    for (const auto& r : records) rows.push_back(json::backend_record(r));
    std::cout << json::Object()
                     .str("core_version", core_version())
                     .str("torch", torch_major_minor())
                     .raw("plugin_abi", std::to_string(kPluginAbi))
                     .raw("search_path", json::list(plugin_search_path(options.load)))
                     .raw("backends", json::array(rows))
                     .done()
              << "\n";
    return kExitOk;
  }
  std::cout << "backplane " << core_version() << ", torch " << torch_major_minor() << ", plugin ABI " << kPluginAbi
            << "\nsearch path: " << join(plugin_search_path(options.load), ":") << "\n\n";
  const int name_width = backend_column_width(records);
  std::cout << std::left << std::setw(name_width) << "BACKEND" << std::setw(13) << "STATUS" << std::setw(13) << "KEY"
            << std::setw(9) << "VERSION" << std::setw(5) << "OPS" << "PATH / REASON\n";
  for (const auto& r : records) {
    std::cout << std::left << std::setw(name_width) << r.name << std::setw(13) << to_string(r.status) << std::setw(13)
              << (r.dispatch_key.empty() ? "-" : r.dispatch_key) << std::setw(9)
              << (r.version.empty() ? "-" : r.version) << std::setw(5) << r.ops.size() << r.path << "\n";
    // A plugin of kind triton (no library: a Python package) is listed from its manifest.
    if (r.kind != "shared_library") std::cout << std::string(name_width + 40, ' ') << "kind: " << r.kind << "\n";
    if (!r.reason.empty()) std::cout << std::string(name_width + 40, ' ') << "reason: " << r.reason << "\n";
  }
  if (records.empty()) std::cout << "(no plugins found)\n";
  return kExitOk;
}

}  // namespace backplane::cli
