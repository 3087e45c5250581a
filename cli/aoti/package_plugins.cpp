#include "aoti/package_plugins.h"

#include <backplane/selection.h>

#include <caffe2/serialize/inline_container.h>
#include <c10/util/StringUtil.h>

#include <sstream>
#include <stdexcept>

namespace backplane::cli {
namespace {
constexpr const char* kEntry = "extra/backplane_plugins.txt";
constexpr const char* kHeader = "# backplane plugins v1: op dispatch_key plugin";
}  // namespace

PluginCheck check_package_plugins(const std::string& package) {
  PluginCheck check;
  caffe2::serialize::PyTorchStreamReader reader(package);
  if (!reader.hasRecord(kEntry)) return check;
  auto [data, size] = reader.getRecord(kEntry);
  std::istringstream in(std::string(static_cast<const char*>(data.get()), size));
  std::string line;
  if (!std::getline(in, line) || line != kHeader)
    throw std::runtime_error(package + ":" + kEntry + ": expected the first line '" + kHeader + "'");
  for (int number = 2; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string op, key, plugin, extra;
    if (!(fields >> op >> key >> plugin) || (fields >> extra))
      throw std::runtime_error(c10::str(package, ":", kEntry, ", line ", number, ": expected 'op dispatch_key plugin'"));
    const std::string now = serving_plugin(op, key);
    if (now.empty()) continue;  // not served on that key here: the package names the op when it calls it
    if (now != plugin)
      check.mismatch.push_back("backplane::" + op + " on " + key + " was served by plugin '" + plugin +
                               "' when the package was made; here '" + now + "' serves it");
    check.notes.push_back("backplane::" + op + " on " + key + ": served by '" + now + "'" +
                          (now == plugin ? " (as packaged)" : " (packaged with '" + plugin + "')"));
  }
  return check;
}

}  // namespace backplane::cli
