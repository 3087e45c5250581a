// Reading a selection file (selection_file.h): every mistake is refused with its place,
// what was expected and what was found, before anything is applied.
#include <backplane/loader.h>
#include <backplane/registry.h>
#include <backplane/selection_file.h>

#include "plugins/plugin_loading.h"
#include "util/posix_files.h"
#include "registry/yaml_location.h"
#include "registry/yaml_strict.h"

#include <c10/core/DispatchKey.h>
#include <c10/util/Exception.h>

#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <sstream>
#include <stdexcept>

namespace backplane {
namespace {

constexpr int kSelectionVersion = 1;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    throw std::invalid_argument(detail::at(path_, node).str() + ": " + what);
  }

  void check_keys(const YAML::Node& map, const std::set<std::string>& allowed, const std::string& what) const {
    if (!map.IsMap()) fail(map, what + ": expected a mapping, found " + detail::kind_name(map));
    if (auto problem = detail::find_unknown_key(map, allowed, what)) fail(problem->node, problem->message);
  }

  std::string scalar(const YAML::Node& map, const char* key, const std::string& what) const {
    const YAML::Node value = map[key];
    if (!value) fail(map, what + ": missing '" + key + "'");
    if (!value.IsScalar()) fail(value, what + ": '" + key + "' must be a scalar, found " + detail::kind_name(value));
    return value.Scalar();
  }

  SelectionFile document(const YAML::Node& root) const {
    if (auto problem = detail::find_duplicate_key(root)) fail(problem->node, problem->message);
    check_keys(root, {"backplane_selection", "made_by", "environment", "ops"}, "selection file");
    const YAML::Node version = root["backplane_selection"];
    if (!version) fail(root, "not a selection file: expected 'backplane_selection: 1' at the top");
    if (!version.IsScalar() || version.Scalar() != std::to_string(kSelectionVersion))
      fail(version, "backplane_selection: expected version " + std::to_string(kSelectionVersion) + ", found " +
                        (version.IsScalar() ? "'" + version.Scalar() + "'" : detail::kind_name(version)));
    const YAML::Node ops = root["ops"];
    if (!ops) fail(root, "selection file: missing 'ops' (a list of {op, dispatch_key, buckets})");
    if (!ops.IsSequence()) fail(ops, std::string("ops: expected a list, found ") + detail::kind_name(ops));
    SelectionFile file;
    if (const YAML::Node environment = root["environment"]) file.environment = this->environment(environment);
    std::set<std::tuple<std::string, std::string, std::string>> seen;
    for (const YAML::Node& entry : ops) {
      SelectionRule rule = this->rule(entry);
      if (!seen.emplace(rule.op, rule.dispatch_key, rule.dtype).second)
        fail(entry, "op '" + rule.op + "' on " + rule.dispatch_key +
                        (rule.dtype.empty() ? std::string() : " for " + rule.dtype) +
                        " appears twice in the file");
      file.rules.push_back(std::move(rule));
    }
    return file;
  }

 private:
  std::string optional_scalar(const YAML::Node& map, const char* key, const std::string& what) const {
    return map[key] ? scalar(map, key, what) : std::string();
  }

  // `environment:` as tune writes it; every field optional, unknown ones refused.
  SelectionEnvironment environment(const YAML::Node& node) const {
    check_keys(node, {"torch", "devices", "plugins"}, "environment");
    SelectionEnvironment env;
    env.torch = optional_scalar(node, "torch", "environment");
    for (const YAML::Node& d : sequence(node, "devices", "environment")) {
      check_keys(d, {"type", "name", "capability", "driver"}, "environment: devices entry");
      env.devices.push_back({scalar(d, "type", "environment: devices entry"),
                             optional_scalar(d, "name", "environment: devices entry"),
                             optional_scalar(d, "capability", "environment: devices entry"),
                             optional_scalar(d, "driver", "environment: devices entry")});
    }
    for (const YAML::Node& p : sequence(node, "plugins", "environment")) {
      check_keys(p, {"name", "version", "sha256"}, "environment: plugins entry");
      env.plugins.push_back({scalar(p, "name", "environment: plugins entry"),
                             optional_scalar(p, "version", "environment: plugins entry"),
                             optional_scalar(p, "sha256", "environment: plugins entry")});
    }
    return env;
  }

  std::vector<YAML::Node> sequence(const YAML::Node& map, const char* key, const std::string& what) const {
    const YAML::Node value = map[key];
    if (!value) return {};
    if (!value.IsSequence()) fail(value, what + ": '" + key + "' must be a list, found " + detail::kind_name(value));
    return {value.begin(), value.end()};
  }

  SelectionRule rule(const YAML::Node& entry) const {
    check_keys(entry, {"op", "dispatch_key", "dtype", "mode", "buckets"}, "ops entry");
    SelectionRule rule;
    const std::string op = scalar(entry, "op", "ops entry");
    try {
      rule.op = detail::chosen_op_id(op);  // as preferences name ops
    } catch (const std::invalid_argument& e) {
      fail(entry["op"], e.what());
    }
    rule.dispatch_key = scalar(entry, "dispatch_key", "ops entry");
    try {
      c10::parseDispatchKey(rule.dispatch_key);
    } catch (const c10::Error&) {
      fail(entry["dispatch_key"], "dispatch_key: expected a dispatch key such as CPU, CUDA or PrivateUse1, found '" +
                                      rule.dispatch_key + "'");
    }
    rule.dtype = optional_scalar(entry, "dtype", "ops entry");
    if (!rule.dtype.empty() && !dtype_names().count(rule.dtype)) {
      std::string known;
      for (const auto& [name, _] : dtype_names()) known += (known.empty() ? "" : ", ") + name;
      fail(entry["dtype"], "op '" + rule.op + "': dtype: expected one of " + known + ", found '" + rule.dtype + "'");
    }
    rule.mode = optional_scalar(entry, "mode", "ops entry");
    if (!rule.mode.empty() && rule.mode != "eager" && rule.mode != "graph" && rule.mode != "compile")
      fail(entry["mode"], "op '" + rule.op + "': mode: expected eager, graph or compile, found '" + rule.mode + "'");
    const YAML::Node buckets = entry["buckets"];
    if (!buckets) fail(entry, "op '" + rule.op + "': missing 'buckets'");
    if (!buckets.IsSequence() || buckets.size() == 0)
      fail(buckets, "op '" + rule.op + "': buckets: expected a list of at least one {up_to, plugin}, found " +
                        (buckets.IsSequence() ? std::string("an empty list") : detail::kind_name(buckets)));
    for (std::size_t i = 0; i < buckets.size(); ++i) rule.buckets.push_back(bucket(buckets[i], rule, i + 1 == buckets.size()));
    return rule;
  }

  SizeBucket bucket(const YAML::Node& node, const SelectionRule& rule, bool last) const {
    const std::string what = "op '" + rule.op + "', bucket " + std::to_string(rule.buckets.size() + 1);
    check_keys(node, {"up_to", "plugin", "measured"}, what);
    SizeBucket b;
    b.plugin = scalar(node, "plugin", what);
    if (!is_valid_backend_name(b.plugin))
      fail(node["plugin"], what + ": '" + b.plugin + "' is not a plugin name (a plain identifier)");
    if (b.plugin == kInductor) check_inductor_can_serve(node["plugin"], rule, what);
    const YAML::Node up_to = node["up_to"];
    if (last) {
      if (up_to)
        fail(up_to, what + " is the last bucket, so it takes every larger call and must have no 'up_to'; found up_to " +
                        (up_to.IsScalar() ? "'" + up_to.Scalar() + "'" : detail::kind_name(up_to)) +
                        ": remove it, or add a bucket after this one for the larger calls");
      return b;
    }
    if (!up_to) fail(node, what + ": missing 'up_to' (elements of the largest Tensor argument); only the last bucket "
                                  "has none");
    std::int64_t limit = -1;
    if (up_to.IsScalar()) {
      std::istringstream in(up_to.Scalar());
      in >> limit;
      if (!in || !in.eof()) limit = -1;
    }
    if (limit < 0)
      fail(up_to, what + ": up_to: expected a whole number of elements >= 0, found " +
                      (up_to.IsScalar() ? "'" + up_to.Scalar() + "'" : detail::kind_name(up_to)));
    // The largest int64 means "every larger call": the last bucket's, written without up_to.
    if (limit == std::numeric_limits<std::int64_t>::max())
      fail(up_to, what + ": up_to: expected fewer than " + up_to.Scalar() +
                      " elements (that many is every larger call: the last bucket, without up_to)");
    if (!rule.buckets.empty() && limit <= rule.buckets.back().up_to)
      fail(up_to, what + ": up_to " + std::to_string(limit) + " must exceed the bucket before it (" +
                      std::to_string(rule.buckets.back().up_to) + ")");
    b.up_to = limit;
    return b;
  }

  // Inductor's code is the op's reference, traced in place of the call: an op without one,
  // or one that writes an argument (its call is functionalized, not replaced), has none.
  void check_inductor_can_serve(const YAML::Node& node, const SelectionRule& rule, const std::string& what) const {
    const OpDef* def = find_op_def(rule.op);
    if (def == nullptr) return;  // a plugin's op whose fragment is not loaded: judged when it is
    if (def->checks.reference.empty())
      fail(node, what + ": '" + std::string(kInductor) + "' is Inductor's code for the op's registry reference, and '" +
                     rule.op + "' has no `reference:`; name a plugin");
    if (def->writes())
      fail(node, what + ": '" + std::string(kInductor) + "' replaces a call returning new tensors, and '" + rule.op +
                     "' writes an argument; name a plugin");
  }

  std::string path_;
};

}  // namespace

SelectionFile read_selection(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = detail::read_regular_file(path, why);  // never blocks (a FIFO)
  if (!text) throw std::invalid_argument(detail::printable_path(path) + ": cannot read the selection file: " + why);
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                                ": not YAML: " + e.msg);
  }
  return Reader(path).document(root);
}

std::vector<SelectionRule> read_selection_file(const std::string& path) { return read_selection(path).rules; }

}  // namespace backplane
