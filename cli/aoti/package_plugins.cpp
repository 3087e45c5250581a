#include "aoti/package_plugins.h"
#include "cli.h"

#include <backplane/registry.h>
#include <backplane/selection.h>

#include <c10/core/DispatchKey.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/StringUtil.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <stdexcept>

namespace backplane::cli {
namespace {

constexpr const char* kEntry = "extra/backplane_plugins.txt";
constexpr const char* kHeader = "# backplane plugins v2: op dispatch_key plugin";
constexpr const char* kHeaderV1 = "# backplane plugins v1: op dispatch_key plugin";
constexpr const char* kSelection = "@selection_file sha256:";
// The core's `why` when two plugins offer an op and nothing chose (selection.h).
constexpr const char* kUnresolved = "loaded first";

std::string qualified(const std::string& op) {
  const OpDef* def = find_op_def(op);
  return def ? def->qualified_name() : op;
}

// `text` as one word of a shell command line (quoted where it must be).
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string("_./-+=:,@%").find(static_cast<char>(c)) != std::string::npos;
  });
  if (plain) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The plugins of a recorded serving: "cpu" -> {cpu}; "cpu_alt<=4096,cpu" -> {cpu_alt, cpu};
// by dtype, "bfloat16:inductor<=65536,cuda;*:cuda" -> {cuda}. `inductor` is no plugin (Inductor's
// code for the reference, selection_file.h): nothing to load for it.
std::vector<std::string> split_plugins(const std::string& plugin) {
  std::vector<std::string> out;
  std::istringstream rules(plugin);
  for (std::string rule; std::getline(rules, rule, ';');) {
    std::istringstream in(rule.substr(rule.find(':') == std::string::npos ? 0 : rule.find(':') + 1));
    for (std::string part; std::getline(in, part, ',');) {
      const std::string name = part.substr(0, part.find("<="));
      if (name != kInductor && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return out;
}

// Whether a recorded serving came from a selection file (a split by size or dtype, or Inductor's code).
bool from_selection_file(const std::string& recorded) {
  return recorded.find("<=") != std::string::npos || recorded.find(';') != std::string::npos ||
         recorded.find(':') != std::string::npos || !split_plugins(recorded).size() ||
         recorded.find(kInductor) != std::string::npos;
}

// The flags that make `now` serve op as `recorded`: each itself accepted by `backplane run`.
std::string way_back(const std::string& op, const std::string& recorded, const ServingRecord& now,
                     const PluginRecord& record) {
  std::vector<std::string> missing;
  for (const auto& p : split_plugins(recorded))
    if (std::find(now.offered_by.begin(), now.offered_by.end(), p) == now.offered_by.end()) missing.push_back("'" + p + "'");
  const std::string load = missing.empty() ? "" : "load " + join(missing, ", ") + " (add it to --backends), then ";
  if (!from_selection_file(recorded)) return load + "prefer '" + recorded + "' (--prefer " + op + ":" + recorded + ")";
  const std::string which = record.selection_digest.empty()
                                ? std::string("a selection file")
                                : "the selection file " + record.selection_path + " (sha256 " +
                                      record.selection_digest.substr(0, 16) + ")";
  const std::string withdraw = now.why == "preferred for " + op
                                   ? "drop the preference for '" + op +
                                         "' (--prefer, BACKPLANE_PREFER), which overrides a selection file, and "
                                   : "";
  const std::string file = record.selection_path.empty() ? "FILE" : shell_word(record.selection_path);
  return "it was split by size by " + which + ": " + load + withdraw + "apply that file (--selection " + file + ")";
}

}  // namespace

std::optional<PluginRecord> read_plugin_record(const std::string& package) {
  caffe2::serialize::PyTorchStreamReader reader(package);
  if (!reader.hasRecord(kEntry)) return std::nullopt;
  auto [data, size] = reader.getRecord(kEntry);
  std::istringstream in(std::string(static_cast<const char*>(data.get()), size));
  const std::string where = package + ":" + kEntry;
  std::string line;
  if (!std::getline(in, line) || (line != kHeader && line != kHeaderV1))
    throw std::runtime_error(where + ": expected the first line '" + kHeader + "' (or v1's), found '" + line + "'");
  const bool v2 = line == kHeader;
  PluginRecord record;
  for (int number = 2; std::getline(in, line); ++number) {
    if (v2 && record.selection_digest.empty() && line.rfind("@selection_file", 0) == 0) {
      const std::string rest = line.rfind(kSelection, 0) == 0 ? line.substr(std::string(kSelection).size()) : "";
      const std::string digest = rest.substr(0, 64);
      const bool hex = digest.size() == 64 && digest.find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!hex || (rest.size() > 64 && (rest[64] != ' ' || rest.size() == 65)))
        throw std::runtime_error(c10::str(where, ", line ", number, ": expected '@selection_file sha256:HEX [PATH]', found '",
                                          line, "'"));
      record.selection_digest = digest;
      record.selection_path = rest.size() > 65 ? rest.substr(65) : "";
      continue;
    }
    std::istringstream fields(line);
    std::string op, key, plugin, extra;
    if (!(fields >> op >> key >> plugin) || (fields >> extra) || op[0] == '@')
      throw std::runtime_error(c10::str(where, ", line ", number, ": expected 'op dispatch_key plugin', found '", line, "'"));
    record.rows.push_back({op, key, plugin});
  }
  return record;
}

PluginCheck check_package_plugins(const std::string& package, const PackageNeeds& needs) {
  PluginCheck check;
  const auto record = read_plugin_record(package);
  std::map<std::pair<std::string, std::string>, ServingRecord> now;
  for (auto& s : serving()) now.emplace(std::make_pair(s.op, s.dispatch_key), s);
  if (!record) {
    const std::string key =
        c10::toString(c10::computeDispatchKey(std::nullopt, c10::kStrided, c10::Device(needs.device)));
    for (const auto& op : needs.ops) {
      const auto found = now.find({op, key});
      if (found == now.end() || found->second.offered_by.size() < 2) continue;
      const ServingRecord& s = found->second;
      const std::string name = qualified(op) + " on " + key;
      if (s.why != kUnresolved) {
        check.notes.push_back(name + ": served by '" + s.serving + "' (the package records no plugins; " + s.why + ")");
        continue;
      }
      std::string prefer;
      for (const auto& p : s.offered_by) prefer += (prefer.empty() ? "--prefer " : " or --prefer ") + op + ":" + p;
      check.refused.push_back("the package records no plugins (it was made where Backplane did not record them), and " +
                              name + " is offered here by " + join(s.offered_by, ", ") + ": '" + s.serving +
                              "' serves it only because it was loaded first, which need not be the plugin it was made "
                              "with. Choose: apply a selection file (--selection FILE) or prefer one (" + prefer + ")");
      check.notes.push_back(name + ": served by '" + s.serving + "' (the package records no plugins; loaded first: allowed)");
    }
    return check;
  }
  for (const auto& [op, key, plugin] : record->rows) {
    const auto found = now.find({op, key});
    if (found == now.end()) continue;  // not served on that key here: the package names the op when it calls it
    const ServingRecord& s = found->second;
    const std::string name = qualified(op) + " on " + key;
    if (s.serving != plugin)
      check.refused.push_back(name + " was served by plugin '" + plugin + "' when the package was made; here '" + s.serving +
                              "' serves it (" + s.why + "; offered by " + join(s.offered_by, ", ") +
                              "). To run it as made: " + way_back(op, plugin, s, *record));
    check.notes.push_back(name + ": served by '" + s.serving + "'" +
                          (s.serving == plugin ? " (as packaged)" : " (packaged with '" + plugin + "')"));
  }
  return check;
}

}  // namespace backplane::cli
