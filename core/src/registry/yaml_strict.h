// Strictness yaml-cpp lacks: a mapping that repeats a key keeps both entries and
// node[key] finds the first, so a repeated key would be silently dropped. Every
// reader of registry, class and manifest YAML asks these before it reads a value;
// each turns the answer into its own error type with file:line:column.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>

namespace backplane::detail {

struct YamlProblem {
  YAML::Node node;  // the offending key, for its line and column
  std::string message;
};

// The first key repeated within one mapping anywhere under `node` (nested mappings
// and lists included): "key 'schema' appears twice in one mapping (first at line 2,
// column 5)". A document nested deeper than 64 levels or walking to more than 100000
// nodes (aliases share nodes: a cycle, or an exponential expansion) is a problem too.
std::optional<YamlProblem> find_duplicate_key(const YAML::Node& node);

// The first key of the mapping `map` outside `allowed`:
// "unknown <what> key 'x'; expected one of: a, b".
std::optional<YamlProblem> find_unknown_key(const YAML::Node& map, const std::set<std::string>& allowed,
                                            const std::string& what);

}  // namespace backplane::detail
