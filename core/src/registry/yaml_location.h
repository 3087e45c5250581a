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

// Where character `column` (1-based) of scalar `node`'s value is in `text`, the document
// it was parsed from: a formula's error points at the name it is about. The scalar's own
// place when its value is not written verbatim on one line (a block scalar, an escape).
inline SourceLocation at_column(const std::string& file, const std::string& text, const YAML::Node& node,
                                size_t column) {
  SourceLocation where = at(file, node);
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || !node.IsScalar() || mark.pos < 0 || column == 0) return where;
  size_t start = static_cast<size_t>(mark.pos);  // the scalar's first character: its quote, when quoted
  if (start < text.size() && (text[start] == '"' || text[start] == '\'')) ++start;
  const std::string& value = node.Scalar();
  if (column > value.size() + 1 || start > text.size() || text.compare(start, value.size(), value) != 0 ||
      value.find('\n') != std::string::npos)
    return where;
  where.column += static_cast<int>(start - static_cast<size_t>(mark.pos) + column - 1);
  return where;
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
