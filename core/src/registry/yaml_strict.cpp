#include "registry/yaml_strict.h"

#include <map>

namespace backplane::detail {
namespace {

std::string position(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return "an unknown position";
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// yaml-cpp shares an aliased node instead of copying it, so a document can be a
// cycle (&a [*a]) or expand exponentially (nested aliases); the walk is bounded.
constexpr int kMaxDepth = 64;
constexpr long kMaxNodes = 100000;

struct DuplicateFinder {
  long visited = 0;

  std::optional<YamlProblem> walk(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth)
      return YamlProblem{node, "nested deeper than " + std::to_string(kMaxDepth) + " levels (an alias cycle?)"};
    if (++visited > kMaxNodes)
      return YamlProblem{node, "more than " + std::to_string(kMaxNodes) + " nodes (aliases that expand?)"};
    if (node.IsSequence()) {
      for (const auto& item : node)
        if (auto problem = walk(item, depth + 1)) return problem;
      return std::nullopt;
    }
    if (!node.IsMap()) return std::nullopt;
    std::map<std::string, YAML::Node> seen;  // only scalar keys can be compared by text
    for (const auto& entry : node) {
      if (entry.first.IsScalar()) {
        const auto [first, inserted] = seen.emplace(entry.first.Scalar(), entry.first);
        if (!inserted)
          return YamlProblem{entry.first, "key '" + entry.first.Scalar() + "' appears twice in one mapping (first at " +
                                              position(first->second) + ")"};
      }
      if (auto problem = walk(entry.first, depth + 1)) return problem;
      if (auto problem = walk(entry.second, depth + 1)) return problem;
    }
    return std::nullopt;
  }
};

}  // namespace

std::optional<YamlProblem> find_duplicate_key(const YAML::Node& node) { return DuplicateFinder().walk(node, 0); }

std::optional<YamlProblem> find_unknown_key(const YAML::Node& map, const std::set<std::string>& allowed,
                                            const std::string& what) {
  for (const auto& entry : map) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (allowed.count(key)) continue;
    std::string list;
    for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
    return YamlProblem{entry.first, "unknown " + what + " key '" + key + "'; expected one of: " + list};
  }
  return std::nullopt;
}

}  // namespace backplane::detail
