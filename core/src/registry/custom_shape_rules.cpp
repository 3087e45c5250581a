// The custom shape rules by name, as each rule's file registers it (BACKPLANE_SHAPE_RULE).
#include "registry/custom_shape_rules.h"

#include <c10/util/Exception.h>

#include <map>

namespace backplane {
namespace {
// By name, so lookups and the names in messages do not depend on the order the rules'
// files were linked in.
std::map<std::string, CustomShapeRule>& rules() {
  static std::map<std::string, CustomShapeRule> table;
  return table;
}
}  // namespace

detail::ShapeRuleRegistrar::ShapeRuleRegistrar(const char* name, CustomShapeRule rule) {
  TORCH_CHECK(rules().emplace(name, rule).second, "backplane: two custom shape rules are named '", name,
              "' (core/src/define/shape_rules/); expected one rule per name");
}

CustomShapeRule find_custom_shape_rule(const std::string& name) {
  auto it = rules().find(name);
  return it == rules().end() ? nullptr : it->second;
}

std::vector<std::string> custom_shape_rule_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : rules()) names.push_back(name);
  return names;
}

}  // namespace backplane
