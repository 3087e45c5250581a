// The names a registry entry may give as {custom: name}, each bound to its hand-written
// shape rule. The table lives here so that the registry's readers can check a name while
// parsing; the rules themselves live in define/shape_rules/, one file each, and add
// themselves with BACKPLANE_SHAPE_RULE. Limits: a rule must be linked into the core (a
// plugin cannot add one).
#pragma once

#include <backplane/registry.h>

#include <ATen/core/ivalue.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace backplane {

// Sizes are symbolic: compare them with sym_* and expect_true, never by value, so
// dynamic dimensions survive torch.export.
using CustomShapeRule = std::vector<c10::SymInt> (*)(const OpDef& op, c10::ArrayRef<c10::IValue> args);

// nullptr when core has no rule of that name.
CustomShapeRule find_custom_shape_rule(const std::string& name);
std::vector<std::string> custom_shape_rule_names();  // sorted

namespace detail {
// Adds `rule` under `name`. Two rules of one name stop the core as it loads, naming it.
struct ShapeRuleRegistrar {
  ShapeRuleRegistrar(const char* name, CustomShapeRule rule);
};
}  // namespace detail

// Registers `fn` as the rule {custom: name}; written in namespace backplane at the foot of
// the rule's own file. The registrars run before the core's other static initializers
// (init_priority; GCC and clang): its TORCH_LIBRARY block parses the registry, which
// looks the rules up, as the library loads.
#define BACKPLANE_SHAPE_RULE(name, fn) \
  static const ::backplane::detail::ShapeRuleRegistrar shape_rule_##name __attribute__((init_priority(101))) { #name, fn }

}  // namespace backplane
