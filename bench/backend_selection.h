// Which backends the benchmark runs: `--backends=cpu,cuda` (or `--backends cpu,cuda`),
// else BACKPLANE_BACKENDS, else "cpu". Each is loaded by name; one that cannot be
// loaded, or whose device this process lacks (cuda without a GPU), is skipped with
// its reason, never a crash.
#pragma once

#include <backplane/loader.h>

#include <c10/core/Device.h>

#include <set>
#include <string>
#include <vector>

namespace backplane::bench {

struct SelectedBackend {
  std::string name;           // as named: "cpu", "cuda"
  c10::Device device;         // the device its dispatch key runs on (index 0)
  std::set<std::string> ops;  // registry ops it has a kernel for
  BackendRecord record;
};

struct SkippedBackend {
  std::string name;
  std::string reason;
};

struct BackendSelection {
  std::vector<SelectedBackend> selected;
  std::vector<SkippedBackend> skipped;
};

// Loads each of `names` (take_bench_options reads them, bench_options.h) and sorts it
// into selected or skipped, with why. Never throws for a backend.
BackendSelection select_backends(const std::vector<std::string>& names);

}  // namespace backplane::bench
