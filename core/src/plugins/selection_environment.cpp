// A selection file's environment against this process's (selection_environment.h).
#include "plugins/selection_environment.h"

#include "util/sha256.h"

#include <torch/version.h>

#include <algorithm>

namespace backplane::detail {
namespace {

std::string without_local_part(const std::string& version) { return version.substr(0, version.find('+')); }

void compare(std::vector<std::string>& out, const std::string& what, const std::string& measured,
             const std::string& here) {
  if (!measured.empty() && measured != here) out.push_back(what + " " + measured + " there, " + here + " here");
}

}  // namespace

std::vector<std::string> environment_differences(const SelectionEnvironment& measured, const std::string& torch_here,
                                                 const std::vector<SelectionDevice>& devices_here,
                                                 const std::vector<BackendRecord>& loaded) {
  std::vector<std::string> out;
  if (!measured.torch.empty()) {
    if (torch_here.empty())  // the C++ runner: the version it was built against has no local part
      compare(out, "torch", without_local_part(measured.torch), TORCH_VERSION);
    else
      compare(out, "torch", measured.torch, torch_here);
  }
  for (const SelectionDevice& d : measured.devices) {
    std::vector<const SelectionDevice*> same_type;
    for (const auto& h : devices_here)
      if (h.type == d.type) same_type.push_back(&h);
    if (same_type.empty()) {
      // Described by the caller as absent only when it describes devices at all.
      if (!devices_here.empty()) out.push_back("device " + d.type + " (" + d.name + ") there, none here");
      continue;
    }
    const SelectionDevice& h = *same_type.front();  // device 0 of the type: where tune ran
    compare(out, d.type + " device", d.name, h.name);
    compare(out, d.type + " capability", d.capability, h.capability);
    compare(out, d.type + " driver", d.driver, h.driver);
  }
  for (const SelectionPlugin& p : measured.plugins) {
    auto it = std::find_if(loaded.begin(), loaded.end(), [&](const BackendRecord& r) { return r.name == p.name; });
    if (it == loaded.end()) continue;  // named but not loaded: applying says so already, per bucket
    compare(out, "plugin " + p.name + " version", p.version, it->version);
    if (!p.sha256.empty()) {
      const std::string here = sha256_of_file(it->path).value_or("unreadable");
      if (here != p.sha256)
        out.push_back("plugin " + p.name + " file " + it->path + ": sha256 " + p.sha256.substr(0, 12) + "... there, " +
                      here.substr(0, 12) + "... here (another build)");
    }
  }
  return out;
}

}  // namespace backplane::detail
