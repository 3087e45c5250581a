// `backplane bench`'s warning for a plugin built unoptimised (a Debug build, or no
// CMAKE_BUILD_TYPE at all): its times say little about the plugin a vendor ships. The
// build type is the one the plugin's manifest records (backplane_add_plugin); nothing is
// loaded to read it.
#include "cli.h"

#include "plugins/manifest.h"

#include <filesystem>
#include <iostream>

namespace backplane::cli {

void warn_unoptimised_plugins(const std::vector<BackendRecord>& selected) {
  for (const auto& r : selected) {
    if (r.kind != "shared_library") continue;
    try {
      const auto manifest = std::filesystem::path(r.path).parent_path() / manifest_file_name(r.name);
      const std::string build_type = read_manifest(manifest.string()).build_type;
      if (const auto why = unoptimised_build_type(build_type))
        std::cerr << "backplane bench: warning: plugin '" << r.name << "' is " << *why << " (build_type: " << build_type
                  << " in " << manifest.string() << "): its times are not an optimised build's; rebuild it with "
                  << "-DCMAKE_BUILD_TYPE=Release\n";
    } catch (const std::exception&) {
      // an unreadable manifest: the loader reports it when the bench loads the plugin
    }
  }
}

}  // namespace backplane::cli
