// Where plugins are looked for, and what counts as a backend name.
#include <backplane/loader.h>

#include <dlfcn.h>

#include <cstdlib>
#include "posix_files.h"

namespace backplane {

// By hand rather than std::regex: no locale is involved, so it cannot trip over a
// libstdc++ linked statically into a neighbouring library.
bool is_valid_backend_name(const std::string& name) {
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (name.empty() || !letter(name[0]) || name == "core") return false;
  for (char c : name)
    if (!letter(c) && !digit(c)) return false;
  return true;
}

static std::string core_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&core_library_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  return detail::parent_dir(info.dli_fname);
}

std::vector<std::string> plugin_search_path(const LoadOptions& options) {
  std::vector<std::string> dirs;
  if (options.dir) dirs.push_back(*options.dir);
  if (const char* env = std::getenv("BACKPLANE_PLUGIN_PATH")) {
    std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  const std::string own = core_library_dir();
  if (!own.empty()) dirs.push_back(own);
  return dirs;
}

}  // namespace backplane
