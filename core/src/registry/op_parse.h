// One op entry of a registry document's `ops:` list, parsed (formulas are checked later,
// once the whole document is read: document_formulas.h).
#pragma once

#include <backplane/registry.h>

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace backplane::detail {

// Throws RegistryError at the offending node.
OpDef parse_op(const std::string& file, const YAML::Node& node);

// "x, weight" -> {x, weight}; an empty name (",x") makes the list empty: an error.
std::vector<std::string> split_names(const std::string& key);

}  // namespace backplane::detail
