// `sharding:` is one word (pointwise, replicate, none) or a mapping {mixes: N, summed: [i]}.
// What each means for DTensor: python/backplane/sharding/, docs/distributed.md.
#include "registry/sharding_parse.h"

#include "registry/yaml_location.h"

#include <set>

namespace backplane::detail {
namespace {

constexpr const char* kExpected =
    "expected pointwise, replicate, none, or {mixes: N} (N trailing dimensions read across; "
    "optional summed: [output index, ...])";

class ShardingParser {
 public:
  ShardingParser(const std::string& file, OpDef& op) : file_(file), op_(op) {}

  void parse(const YAML::Node& node) {
    ShardingRule& rule = op_.sharding;
    rule.where = at(file_, node);
    if (node.IsScalar()) {
      const std::string& word = node.Scalar();
      if (word == "pointwise") rule.kind = ShardingKind::Pointwise;
      else if (word == "replicate") rule.kind = ShardingKind::Replicate;
      else if (word == "none") rule.kind = ShardingKind::None;
      else fail(node, "is '" + word + "'; " + kExpected);
      return;
    }
    if (!node.IsMap()) fail(node, std::string("is ") + kind_name(node) + "; " + kExpected);
    for (const auto& entry : node) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
      if (key != "mixes" && key != "summed")
        fail(entry.first, "has unknown key '" + key + "'; expected mixes (and optionally summed)");
    }
    const YAML::Node mixes = node["mixes"];
    if (!mixes) fail(node, std::string("is a mapping without 'mixes'; ") + kExpected);
    rule.kind = ShardingKind::Mixes;
    rule.mixes = integer(mixes, "mixes");
    if (rule.mixes < 1) fail(mixes, "mixes is " + std::to_string(rule.mixes) + "; expected the number of trailing "
                                     "dimensions the op reads across, 1 or more (pointwise ops say pointwise)");
    if (const YAML::Node summed = node["summed"]) parse_summed(summed);
  }

 private:
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw RegistryError(at(file_, node), "op '" + op_.name + "': key 'sharding' " + message);
  }

  int integer(const YAML::Node& node, const std::string& what) const {
    try {
      if (node.IsScalar()) return node.as<int>();
    } catch (const YAML::Exception&) {
    }
    fail(node, "has " + what + " '" + (node.IsScalar() ? node.Scalar() : kind_name(node)) + "'; expected an integer");
  }

  void parse_summed(const YAML::Node& node) {
    if (!node.IsSequence()) fail(node, std::string("has summed ") + kind_name(node) + "; expected a list of output indices");
    const int outputs = static_cast<int>(op_.new_outputs());
    std::set<int> seen;
    for (const auto& item : node) {
      const int index = integer(item, "summed entry");
      if (index < 0 || index >= outputs)
        fail(item, "has summed output " + std::to_string(index) + ", but the op returns " + std::to_string(outputs) +
                       " tensor(s); expected an index from 0 to " + std::to_string(outputs - 1));
      if (!seen.insert(index).second) fail(item, "names summed output " + std::to_string(index) + " twice");
      op_.sharding.summed.push_back(index);
    }
  }

  const std::string& file_;
  OpDef& op_;
};

}  // namespace

void parse_sharding(const std::string& file, const YAML::Node& node, OpDef& op) {
  ShardingParser(file, op).parse(node);
}

}  // namespace backplane::detail
