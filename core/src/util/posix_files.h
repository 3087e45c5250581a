// The few file-system queries the core needs (the loader, the readers of manifests,
// selection files and vendor fragments), on plain POSIX calls.
//
// Not std::filesystem: torch 2.11's libtorch.so exports its own copies of std::filesystem
// functions, the dynamic linker binds a plugin host's calls to them, and on the GPU
// machine one of them (remove_all) jumped to a null address (seen 2026-11-22, torch
// 2.11.0+cu130). libc is the one implementation every process shares.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

inline bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// What a path names when it is not a regular file ("a FIFO (named pipe)", "a directory"),
// or nullopt for a regular file. A FIFO or a device named where a file is expected would
// block a reader, or never end.
inline std::optional<std::string> not_regular(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

// Why `path` (symlinks followed) cannot be read as a regular file, or nullopt when it can.
inline std::optional<std::string> not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string(std::strerror(errno));
  if (auto kind = not_regular(st)) return "it is " + *kind + ", expected a regular file";
  return std::nullopt;
}

// Files the core reads whole (manifests, registry fragments, selection files) are a few
// KB; a larger one is something else (a disk image, a log), never worth holding in memory.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{16} << 20;

// The whole text of a regular file of at most `max_bytes`, or nullopt with `why` set.
// Opened without blocking and checked on the open descriptor before any read, so a FIFO
// swapped in after a stat is refused too; the size is checked before reading and again
// while reading (a file that grows meanwhile, or one whose size stat cannot tell).
inline std::optional<std::string> read_regular_file(const std::string& path, std::string& why,
                                                    std::size_t max_bytes = kMaxTextFileBytes) {
  const auto too_large = [&] {
    return "it holds more than " + std::to_string(max_bytes >> 20) + " MiB (" + std::to_string(max_bytes) +
           " bytes); expected a small text file";
  };
  if (path.find('\0') != std::string::npos) {  // the C calls below would read a shorter path
    why = "the path holds a NUL character";
    return std::nullopt;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  std::optional<std::string> text;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (auto kind = not_regular(st)) {
    why = "it is " + *kind + ", expected a regular file";
  } else if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    why = too_large();
  } else {
    text.emplace();
    char buffer[65536];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
      if (n > 0) {
        text->append(buffer, static_cast<size_t>(n));
        if (text->size() <= max_bytes) continue;
        why = too_large();
      } else if (errno == EINTR) {
        continue;
      } else {
        why = std::strerror(errno);
      }
      text.reset();
      break;
    }
  }
  ::close(fd);
  return text;
}

// `path` for a message: a NUL shown as \0 (a C string, what() included, would end at it).
inline std::string printable_path(const std::string& path) {
  std::string out;
  for (const char c : path) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
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
