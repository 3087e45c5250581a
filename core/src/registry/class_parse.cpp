// Parses one entry of a registry `classes:` list into a ClassDef. Like the op parser,
// every error names file:line:column and says what was expected and what was found.
#include "registry/yaml_location.h"
#include "registry/yaml_strict.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <set>

namespace backplane::detail {
namespace {

// State a class can hold: what survives pickling into a .pt2 and round-trips through
// __obj_flatten__ for FakeScriptObject without any per-class code.
const std::set<std::string>& state_types() {
  static const std::set<std::string> types = {"int", "float", "bool", "str"};
  return types;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

class ClassParser {
 public:
  ClassParser(const std::string& file, const YAML::Node& node) : file_(file), node_(node) {}

  ClassDef parse() {
    if (!node_.IsMap()) fail(node_, std::string("expected a class: a mapping with name, doc, init and methods, found ") +
                                        kind_name(node_));
    check_keys(node_, {"name", "doc", "init", "methods"}, "class");
    cls_.where = at(file_, node_);
    cls_.name = scalar(required(node_, "name", "class"), "a class name");
    if (!is_identifier(cls_.name)) fail(node_["name"], "class name '" + cls_.name + "' is not an identifier");
    cls_.doc = scalar(required(node_, "doc", "class"), "a one-line doc");
    parse_init(required(node_, "init", "class"));
    const YAML::Node methods = required(node_, "methods", "class");
    if (!methods.IsSequence() || methods.size() == 0)
      fail(methods, std::string("expected 'methods' to be a non-empty list, found ") + kind_name(methods));
    for (const auto& m : methods) cls_.methods.push_back(parse_method(m));
    return std::move(cls_);
  }

 private:
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw RegistryError(at(file_, node), message);
  }

  std::string scalar(const YAML::Node& node, const char* what) const {
    if (!node.IsScalar()) fail(node, std::string("expected ") + what + " (a string), found " + kind_name(node));
    return node.Scalar();
  }

  YAML::Node required(const YAML::Node& parent, const char* key, const std::string& what) const {
    YAML::Node node = parent[key];
    if (!node) {
      const std::string name = cls_.name.empty() ? "" : " of class '" + cls_.name + "'";
      fail(parent, what + name + " is missing required key '" + key + "'");
    }
    return node;
  }

  void check_keys(const YAML::Node& node, const std::set<std::string>& known, const std::string& what) const {
    // Repeated keys anywhere under the class: parse_registry checks the whole document,
    // but a class is checked on its own too, for callers that hand one over directly.
    if (auto problem = find_duplicate_key(node)) fail(problem->node, problem->message);
    if (auto problem = find_unknown_key(node, known, what)) fail(problem->node, problem->message);
  }

  c10::FunctionSchema parse_schema(const YAML::Node& node, const std::string& text) const {
    c10::FunctionSchema schema = [&] {
      try {
        return torch::jit::parseSchema(text);
      } catch (const std::exception& e) {
        std::string why = e.what();
        if (auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
        fail(node, "bad schema '" + text + "': " + why);
      }
    }();
    // parseSchema accepts two arguments of one name; state and calls would see only one.
    std::set<std::string> names;
    for (const auto& arg : schema.arguments())
      if (!names.insert(arg.name()).second)
        fail(node, "schema '" + text + "' has two arguments named '" + arg.name() + "'");
    return schema;
  }

  // init: "(int channels, float gain)": the constructor's arguments are the state.
  void parse_init(const YAML::Node& node) {
    cls_.init = scalar(node, "the constructor's arguments, e.g. (int channels)");
    const auto schema = parse_schema(node, "__init__" + cls_.init + " -> ()");
    for (const auto& arg : schema.arguments()) {
      const std::string type = arg.type()->str();
      if (!state_types().count(type))
        fail(node, "state field '" + arg.name() + "' of class '" + cls_.name + "' has type '" + type +
                       "'; expected one of: bool, float, int, str");
      if (arg.default_value())
        fail(node, "state field '" + arg.name() + "' of class '" + cls_.name + "' has a default; defaults are not supported");
      cls_.state.push_back({arg.name(), type});
    }
  }

  MethodDef parse_method(const YAML::Node& node) {
    if (!node.IsMap()) fail(node, std::string("expected a method: a mapping with schema, doc and calls or returns, found ") +
                                      kind_name(node));
    check_keys(node, {"schema", "doc", "calls", "returns"}, "method");
    MethodDef m;
    m.where = at(file_, node);
    const YAML::Node schema_node = required(node, "schema", "method");
    m.schema = scalar(schema_node, "a method schema, e.g. forward(Tensor x) -> Tensor");
    const auto schema = parse_schema(schema_node, m.schema);
    m.name = schema.name();
    if (m.name.rfind("__", 0) == 0)
      fail(schema_node, "method '" + m.name + "' is reserved: the core defines __init__, __getstate__, __setstate__ "
                        "and __obj_flatten__ from the state");
    for (const auto& other : cls_.methods)
      if (other.name == m.name) fail(schema_node, "duplicate method '" + m.name + "'; first defined at " + other.where.str());
    m.doc = scalar(required(node, "doc", "method"), "a one-line doc");
    const bool calls = static_cast<bool>(node["calls"]), returns = static_cast<bool>(node["returns"]);
    if (calls == returns)
      fail(node, "method '" + m.name + "' needs exactly one of 'calls: <op>' or 'returns: <state field>'");
    if (calls) {
      m.kind = MethodDef::Kind::CallsOp;
      m.target = scalar(node["calls"], "an op name");
      // That the op exists and matches is checked once every file is merged.
    } else {
      m.kind = MethodDef::Kind::ReturnsField;
      m.target = scalar(node["returns"], "a state field");
      const ClassField* field = cls_.field(m.target);
      if (field == nullptr) fail(node["returns"], "'" + m.target + "' is not a state field of class '" + cls_.name + "'");
      if (!schema.arguments().empty() || schema.returns().size() != 1 || schema.returns()[0].type()->str() != field->type)
        fail(schema_node, "method '" + m.name + "' returns state field '" + m.target + "', so its schema must be '" +
                              m.name + "() -> " + field->type + "'; found '" + m.schema + "'");
    }
    return m;
  }

  const std::string& file_;
  const YAML::Node& node_;
  ClassDef cls_;
};

}  // namespace

ClassDef parse_class(const std::string& file, const YAML::Node& node) { return ClassParser(file, node).parse(); }

}  // namespace backplane::detail
