// Where the running `backplane` command lies: installed, bin/ of its prefix; in a
// checkout, the build's bin/. What it finds beside it (the bench engine, share/'s
// templates, the checkout's python/) is looked up from here.
#include "cli.h"

#include <system_error>

namespace backplane::cli {

std::optional<std::filesystem::path> command_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  return exe.parent_path();
}

}  // namespace backplane::cli
