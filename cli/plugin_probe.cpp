#include "plugin_probe.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace backplane::cli {
namespace {

constexpr const char* kLoaded = "backplane-probe: loaded\n";
constexpr const char* kNotLoaded = "backplane-probe: not loaded: ";
constexpr const char* kPassed = "backplane-probe: passed\n";  // probe_verdict_command's words
constexpr const char* kFailed = "backplane-probe: failed: ";
constexpr int kDefaultTimeoutSeconds = 60;

// BACKPLANE_PROBE_TIMEOUT: whole seconds, 1 to 3600.
int timeout_seconds() {
  const char* text = std::getenv("BACKPLANE_PROBE_TIMEOUT");
  long seconds = 0;
  for (const char* c = text; c && *c && seconds <= 3600; ++c)
    seconds = *c >= '0' && *c <= '9' ? seconds * 10 + (*c - '0') : 3601;
  return seconds >= 1 && seconds <= 3600 ? static_cast<int>(seconds) : kDefaultTimeoutSeconds;
}

std::string signal_text(int sig) {
  const char* name = strsignal(sig);  // "Aborted", "Segmentation fault"
  return "signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
}

}  // namespace

std::optional<std::string> probe_in_child(const std::string& name, const LoadOptions& options) {
  int out[2];
  if (pipe(out) != 0) return std::nullopt;  // cannot probe: the in-process load decides
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string dirs = options.dir.value_or("");
  std::vector<char*> argv = {const_cast<char*>("backplane"), const_cast<char*>("__probe"),
                             const_cast<char*>(name.c_str()), const_cast<char*>(dirs.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return std::nullopt;
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  std::string said;
  int status = 0;
  const int limit = timeout_seconds();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit);
  for (;;) {
    char buffer[4096];
    for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
    const pid_t waited = waitpid(pid, &status, WNOHANG);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) {  // ECHILD (SIGCHLD ignored): judge by what it said
      status = said.find(kLoaded) != std::string::npos ? 0 : (1 << 8);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(out[0]);
      return "did not finish opening within " + std::to_string(limit) +
             " s in a child process probe (killed); not opened here";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  if (WIFSIGNALED(status))
    return "crashed while opening, with " + signal_text(WTERMSIG(status)) +
           ", in a child process probe; not opened here";
  if (said.find(kLoaded) != std::string::npos && WEXITSTATUS(status) == 0) return std::nullopt;
  if (const auto at = said.find(kNotLoaded); at != std::string::npos && WEXITSTATUS(status) == 0) {
    std::string why = said.substr(at + std::strlen(kNotLoaded));
    if (!why.empty() && why.back() == '\n') why.pop_back();
    return why + " (in a child process probe; not opened here)";
  }
  return "ended the process while opening (exit status " + std::to_string(WEXITSTATUS(status)) +
         "), in a child process probe; not opened here";
}

int probe_verdict_command(const std::string& name, const std::string& dirs) {
  LoadOptions options;
  if (!dirs.empty()) options.dir = dirs;
  const std::optional<std::string> failure = probe_in_child(name, options);
  if (!failure) {
    std::fputs(kPassed, stdout);
  } else {
    std::string why = *failure;  // one line: the reader takes the rest of it
    for (char& c : why)
      if (c == '\n') c = ' ';
    std::fputs((kFailed + why + "\n").c_str(), stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

void probe_command(const std::string& name, const std::string& dirs) {
  // A plugin that crashes here is reported by the parent; a core dump of a process holding
  // libtorch (and CUDA) is a large file written for nothing.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  LoadOptions options;
  if (!dirs.empty()) options.dir = dirs;
  // Loaded: the parent may open it too. Not loaded (refused, failed, threw): the parent
  // reports the reason without opening it (a throw through dlopen leaves the loader locked).
  try {
    load(name, options);
    std::fputs(kLoaded, stdout);
  } catch (const std::exception& e) {
    std::string why = e.what();
    for (char& c : why)
      if (c == '\n') c = ' ';
    std::fputs((kNotLoaded + why + "\n").c_str(), stdout);
  }
  std::fflush(stdout);
  _exit(0);  // no static destructors: the plugin's may be what is broken
}

}  // namespace backplane::cli
