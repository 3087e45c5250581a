// The `sharding:` key of a registry op: how DTensor shards it (registry.h's ShardingRule).
#pragma once

#include <backplane/registry.h>

#include <yaml-cpp/yaml.h>

namespace backplane::detail {

// Fills op.sharding from `node` (the key's value); op's schema and shape rules are parsed
// already. Throws RegistryError at the offending node, saying what was expected.
void parse_sharding(const std::string& file, const YAML::Node& node, OpDef& op);

}  // namespace backplane::detail
