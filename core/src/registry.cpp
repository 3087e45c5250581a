// Registry data structures, dtype names, and the registry compiled into the core.
#include <backplane/registry.h>

#include "registry_sources.h"

#include <algorithm>

namespace backplane {

std::string SourceLocation::str() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

RegistryError::RegistryError(SourceLocation where, const std::string& message)
    : std::runtime_error(where.str() + ": " + message), where_(std::move(where)), message_(message) {}

int OpDef::arg_index(std::string_view arg) const {
  auto it = std::find(arg_names.begin(), arg_names.end(), arg);
  return it == arg_names.end() ? -1 : static_cast<int>(it - arg_names.begin());
}

bool OpDef::supports(c10::ScalarType dtype) const {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

const OpDef* Registry::find(std::string_view name) const {
  for (const auto& op : ops_)
    if (op.name == name) return &op;
  return nullptr;
}

void Registry::add(OpDef op) {
  if (const OpDef* first = find(op.name))
    throw RegistryError(op.where, "duplicate op '" + op.name + "'; first defined at " + first->where.str());
  ops_.push_back(std::move(op));
}

void Registry::merge(Registry&& other) {
  for (auto& op : other.ops_) add(std::move(op));
}

const std::map<std::string, c10::ScalarType>& dtype_names() {
  static const std::map<std::string, c10::ScalarType> names = {
      {"float16", c10::kHalf},   {"bfloat16", c10::kBFloat16}, {"float32", c10::kFloat},
      {"float64", c10::kDouble}, {"int8", c10::kChar},         {"uint8", c10::kByte},
      {"int16", c10::kShort},    {"int32", c10::kInt},         {"int64", c10::kLong},
      {"bool", c10::kBool},      {"complex64", c10::kComplexFloat}, {"complex128", c10::kComplexDouble},
  };
  return names;
}

std::string dtype_name(c10::ScalarType dtype) {
  for (const auto& [name, type] : dtype_names())
    if (type == dtype) return name;
  return c10::toString(dtype);
}

const Registry& registry() {
  // Parsed once, on first use. The build ran the same parser over the same text
  // (backplane_registry_check), so a failure here means a corrupted build.
  static const Registry parsed = [] {
    Registry all;
    for (const auto& source : detail::registry_sources()) all.merge(parse_registry(source.text, source.file));
    return all;
  }();
  return parsed;
}

}  // namespace backplane
