// Running another program in place of this process: the benchmark engine, or the Python
// side of a command (`python -m backplane bench|tune`), with the interpreter chosen by
// the rule in cli.h.
#include "cli.h"

#include <backplane/selection.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

fs::path own_dir() { return command_dir().value_or("."); }

// what: said after the program's name when it cannot be run.
int exec_as(const std::string& command, const std::vector<std::string>& args, const std::string& what) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::cerr << "backplane " << command << ": cannot run " << args[0] << what << ": " << std::strerror(errno) << "\n";
  return kExitFailed;
}

// The interpreter of the Python installation whose site-packages holds this command's
// package (the wheel: <site>/backplane/bin/backplane), by the POSIX layout
// <prefix>/lib/pythonX.Y/site-packages with <prefix>/bin/pythonX.Y; empty elsewhere.
std::string python_beside_package() {
  std::error_code ec;
  const fs::path package = fs::weakly_canonical(own_dir() / "..", ec);
  if (ec || !fs::is_regular_file(package / "__init__.py", ec)) return "";
  const fs::path version_dir = package.parent_path().parent_path();  // lib/pythonX.Y
  const fs::path python = version_dir.parent_path().parent_path() / "bin" / version_dir.filename();
  return fs::is_regular_file(python, ec) ? python.string() : "";
}

// The interpreter for the Python side and why it was chosen: BACKPLANE_PYTHON, else the
// one the wheel is installed in, else the one this build was configured with
// (BACKPLANE_BUILD_PYTHON: its torch is the one these libraries were built against), else
// python3 on PATH.
std::pair<std::string, std::string> python_interpreter() {
  const char* python = std::getenv("BACKPLANE_PYTHON");
  if (python && *python) return {python, "BACKPLANE_PYTHON"};
  const std::string installed = python_beside_package();
  if (!installed.empty()) return {installed, "the Python the backplane package is installed in"};
  std::error_code ec;
  if (fs::is_regular_file(BACKPLANE_BUILD_PYTHON, ec)) return {BACKPLANE_BUILD_PYTHON, "the Python of this build"};
  return {"python3", std::string("python3 on PATH: BACKPLANE_PYTHON is unset and the build's Python, ") +
                         BACKPLANE_BUILD_PYTHON + ", is not a file"};
}

}  // namespace

void pass_common_flags_on(const Options& options) {
  if (options.load.dir) {
    const char* old = std::getenv("BACKPLANE_PLUGIN_PATH");
    const std::string path = *options.load.dir + (old && *old ? ":" + std::string(old) : "");
    setenv("BACKPLANE_PLUGIN_PATH", path.c_str(), 1);
  }
  const std::string prefer = preferences_string();
  if (!prefer.empty()) setenv("BACKPLANE_PREFER", prefer.c_str(), 1);
  // --selection set BACKPLANE_SELECTION when it was read (main.cpp).
}

int exec_command(const std::string& command, const std::vector<std::string>& args) {
  return exec_as(command, args, "");
}

int exec_python_side(const std::string& command, const std::vector<std::string>& module_args,
                     const std::string& needed_for) {
  // In a source checkout, the package is python/ beside the build; in a prefix install,
  // P/lib/python (cmake/BackplaneInstall.cmake): the package of this very command, first.
  for (const fs::path& python : {own_dir() / ".." / ".." / "python", own_dir() / ".." / "lib" / "python"}) {
    if (!fs::is_directory(python / "backplane")) continue;
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = fs::canonical(python).string() + (old && *old ? ":" + std::string(old) : "");
    setenv("PYTHONPATH", path.c_str(), 1);
    break;
  }
  const auto [python, chosen_by] = python_interpreter();
  std::vector<std::string> args = {python, "-m", "backplane"};
  args.insert(args.end(), module_args.begin(), module_args.end());
  return exec_as(command, args, " (the Python for " + needed_for + ", chosen as " + chosen_by +
                                    "; set BACKPLANE_PYTHON to a Python with torch)");
}

}  // namespace backplane::cli
