// Registry data structures, dtype names, and the registry compiled into the core.
#include <backplane/registry.h>

#include "registry/registry_sources.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

const c10::IValue* OpInputs::find(std::string_view arg) const {
  for (const auto& [name, value] : args)
    if (name == arg) return &value;
  return nullptr;
}

std::string OpDef::id() const { return ns == kNamespace ? name : ns + "::" + name; }

std::string OpDef::qualified_name() const { return ns + "::" + name; }

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

const ClassField* ClassDef::field(std::string_view name) const {
  for (const auto& f : state)
    if (f.name == name) return &f;
  return nullptr;
}

const ClassDef* Registry::find_class(std::string_view name) const {
  for (const auto& cls : classes_)
    if (cls.name == name) return &cls;
  return nullptr;
}

void Registry::add_class(ClassDef cls) {
  if (const ClassDef* first = find_class(cls.name))
    throw RegistryError(cls.where, "duplicate class '" + cls.name + "'; first defined at " + first->where.str());
  classes_.push_back(std::move(cls));
}

void Registry::merge(Registry&& other) {
  for (auto& op : other.ops_) add(std::move(op));
  for (auto& cls : other.classes_) add_class(std::move(cls));
}

namespace {
std::string types_of(const std::vector<c10::Argument>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : ", ") + a.type()->str();
  return "(" + out + ")";
}
}  // namespace

void Registry::check_classes() const {
  for (const ClassDef& cls : classes_) {
    for (const MethodDef& m : cls.methods) {
      if (m.kind != MethodDef::Kind::CallsOp) continue;
      const OpDef* op = find(m.target);
      if (op == nullptr)
        throw RegistryError(m.where, "method '" + cls.name + "." + m.name + "' calls '" + m.target +
                                         "', which is not an op of the registry");
      // The method forwards its arguments to the op as they come, so both must take
      // and return the same types in the same order.
      const auto method = torch::jit::parseSchema(m.schema);
      const auto target = torch::jit::parseSchema(op->schema);
      const std::string want = types_of(target.arguments()) + " -> " + types_of(target.returns());
      const std::string got = types_of(method.arguments()) + " -> " + types_of(method.returns());
      if (want != got)
        throw RegistryError(m.where, "method '" + cls.name + "." + m.name + "' calls op '" + m.target +
                                         "', so it must take and return what the op does: " + want + "; found " + got);
    }
  }
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

namespace {
Registry parse_compiled_registry() {
  Registry all;
  for (const auto& source : detail::registry_sources()) {
    Registry file = parse_registry(source.text, source.file);
    for (const OpDef& op : file.ops())  // the build's registry check refuses this too
      if (op.ns != kNamespace) throw RegistryError(op.where, "the core registry defines backplane:: ops only");
    all.merge(std::move(file));
  }
  all.check_classes();
  return all;
}
}  // namespace

const Registry& registry() {
  // Parsed once, on first use: in the core's TORCH_LIBRARY block, while the library
  // loads. An exception there would abort the process from a static initializer
  // ("terminate called after throwing ..."), so a bad registry is said once and the
  // process exits 1. That is how the build reports one: backplane_registry_check loads
  // the core built from the same files; elsewhere it means a build that skipped the check.
  static const Registry parsed = [] {
    try {
      return parse_compiled_registry();
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(1);  // not exit(): other libraries are mid-initialization, their atexit handlers unsafe
    }
  }();
  return parsed;
}

}  // namespace backplane
