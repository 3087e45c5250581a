// Helpers shared by the registry parsers: where a YAML node is, and what kind it is,
// for error messages.
#pragma once

#include <backplane/registry.h>

#include <yaml-cpp/yaml.h>

#include <string>

namespace backplane::detail {

inline SourceLocation at(const std::string& file, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

inline const char* kind_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "an undefined node";
  }
}

// One custom class entry of a `classes:` list (class_parse.cpp).
ClassDef parse_class(const std::string& file, const YAML::Node& node);

}  // namespace backplane::detail
