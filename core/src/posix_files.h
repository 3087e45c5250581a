// The few file-system queries the loader needs, on plain POSIX calls.
//
// Not std::filesystem: torch 2.11's libtorch.so exports its own copies of std::filesystem
// functions, the dynamic linker binds a plugin host's calls to them, and on the GPU
// machine one of them (remove_all) jumped to a null address (seen 2026-11-22, torch
// 2.11.0+cu130). libc is the one implementation every process shares.
#pragma once

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace backplane::detail {

inline bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The resolved absolute path, or `path` unchanged when it cannot be resolved.
inline std::string real_path(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : path;
}

inline std::string join_path(const std::string& dir, const std::string& file) {
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

// "a/b/c.so" -> "a/b"; "c.so" -> "."; "/c.so" -> "/".
inline std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The names in `dir` (not "." or ".."), in no particular order; empty if it cannot be read.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

}  // namespace backplane::detail
