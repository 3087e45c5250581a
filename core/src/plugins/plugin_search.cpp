// Where plugins are looked for, and what counts as a backend name.
#include <backplane/loader.h>

#include <dlfcn.h>

#include <cstdlib>
#include "util/posix_files.h"

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

static void append_colon_list(const std::string& list, std::vector<std::string>& dirs) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) dirs.push_back(list.substr(start, end - start));
    start = end + 1;
  }
}

// The installed plugins come first: a directory added later can add backends, never
// replace an installed one by reusing its name (the first directory holding a name wins).
std::vector<std::string> plugin_search_path(const LoadOptions& options) {
  std::vector<std::string> dirs;
  const std::string own = core_library_dir();
  if (!own.empty()) dirs.push_back(own);
  if (options.dir) append_colon_list(*options.dir, dirs);
  if (const char* env = std::getenv("BACKPLANE_PLUGIN_PATH")) append_colon_list(env, dirs);
  return dirs;
}

}  // namespace backplane
