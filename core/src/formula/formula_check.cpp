// Checking a formula without running it: its names, ops, overloads and keywords against
// a FormulaScope, and the types of the values it gives.
#include "formula/formula_node.h"

#include <algorithm>
#include <stdexcept>

namespace backplane::conformance {
namespace {

using Node = ReferenceExpr::Node;

// check(): each node's static type, and the errors evaluation would raise, found without
// running anything.
class Checker {
 public:
  Checker(const std::string& text, const FormulaScope& scope) : text_(text), scope_(scope) {}

  // The types of the values evaluate_all() gives.
  std::vector<c10::TypePtr> all(const Node& root) {
    if (root.kind == Node::Kind::Call) {
      const c10::FunctionSchema schema = call(root);
      std::vector<c10::TypePtr> types;
      for (const auto& ret : schema.returns()) types.push_back(ret.type());
      return types;
    }
    if (root.kind == Node::Kind::List) {
      std::vector<c10::TypePtr> types;
      for (const auto& item : root.args) types.push_back(type(*item.value));
      return types;
    }
    return {type(root)};
  }

 private:
  [[noreturn]] void fail(size_t column, const std::string& what) const { throw FormulaError(text_, column, what); }

  std::string known_names() const {
    std::string out;
    for (const auto& [name, _] : scope_.names) out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "none" : out;
  }

  const c10::TypePtr& name_type(const Node& node) const {
    auto it = scope_.names.find(node.name);
    if (it == scope_.names.end())
      fail(node.column, "unknown name '" + node.name + "'; expected one of: " + known_names());
    return it->second;
  }

  c10::TypePtr type(const Node& node) {
    switch (node.kind) {
      case Node::Kind::Literal:
        return node.literal.isNone() ? c10::NoneType::get() : node.literal.type();
      case Node::Kind::Name:
        return name_type(node);
      case Node::Kind::Index: {
        const c10::TypePtr& t = name_type(node);
        const auto list = t->cast<c10::ListType>();
        const auto element = list ? list->getElementType()->kind() : c10::TypeKind::AnyType;
        if (element != c10::TypeKind::IntType && element != c10::TypeKind::SymIntType)
          fail(node.column, "'" + node.name + "[" + std::to_string(node.index) + "]' indexes '" + node.name +
                                "', which is " + t->str() + ", not an int list");
        return c10::IntType::get();
      }
      case Node::Kind::Dtype: {
        const c10::TypePtr& t = name_type(node);
        if (t->kind() != c10::TypeKind::TensorType)
          fail(node.column, "dtype(" + node.name + ") needs a Tensor, and '" + node.name + "' is " + t->str());
        return c10::IntType::get();  // a ScalarType travels as an int
      }
      case Node::Kind::List:
        return list(node);
      case Node::Kind::Call:
        break;
    }
    const c10::FunctionSchema schema = call(node);
    if (schema.returns().empty()) fail(node.column, qualified(node) + " returns nothing, so it has no value here");
    return schema.returns().front().type();
  }

  // As the evaluator builds lists: ints only (Int[]) or tensors only (Tensor[]).
  c10::TypePtr list(const Node& node) {
    c10::TypePtr element;
    for (const auto& item : node.args) {
      const c10::TypePtr t = type(*item.value);
      const bool tensor = t && t->kind() != c10::TypeKind::NoneType && t->isSubtypeOf(*c10::OptionalType::ofTensor());
      const bool integer = t && (t->kind() == c10::TypeKind::IntType || t->kind() == c10::TypeKind::SymIntType);
      if (!tensor && !integer)
        fail(item.column, "a list holds integers only or tensors only, found " + (t ? t->str() : std::string("a list")));
      const c10::TypePtr kind = tensor ? c10::TypePtr(c10::TensorType::get()) : c10::TypePtr(c10::IntType::get());
      if (element && *element != *kind)
        fail(item.column, "a list holds integers only or tensors only, found both");
      element = kind;
    }
    return element ? c10::TypePtr(c10::ListType::create(element)) : nullptr;
  }

  static std::string qualified(const Node& node) {
    return node.name + (node.overload.empty() ? "" : "." + node.overload);
  }

  c10::FunctionSchema resolve(const Node& node) const {
    if (auto schema = scope_.schema(node.name, node.overload)) return *schema;
    const std::vector<std::string> overloads = scope_.overloads ? scope_.overloads(node.name) : std::vector<std::string>{};
    if (overloads.empty()) fail(node.column, "unknown op " + node.name + ": neither PyTorch, the registry nor a loaded library defines it");
    std::string list;
    for (const auto& o : overloads) list += (list.empty() ? "" : ", ") + node.name + (o.empty() ? "" : "." + o);
    fail(node.column, node.overload.empty()
                          ? node.name + " has no default overload; write one of: " + list
                          : node.name + " has no overload '" + node.overload + "'; it has: " + list);
  }

  c10::FunctionSchema call(const Node& node) {
    c10::FunctionSchema schema = resolve(node);
    const auto& params = schema.arguments();
    std::vector<bool> given(params.size(), false);
    size_t positional = 0;
    for (const auto& arg : node.args) {
      size_t slot = positional;
      if (arg.keyword.empty()) {
        ++positional;
        if (slot >= params.size())
          fail(arg.column, qualified(node) + " takes " + std::to_string(params.size()) + " argument(s), found more");
      } else {
        auto idx = schema.argumentIndexWithName(arg.keyword);
        if (!idx) fail(arg.column, qualified(node) + " has no argument '" + arg.keyword + "'; it has: " + param_names(params));
        slot = *idx;
      }
      if (given[slot]) fail(arg.column, qualified(node) + " is given argument '" + params[slot].name() + "' twice");
      given[slot] = true;
      type(*arg.value);
    }
    for (size_t i = 0; i < params.size(); ++i)
      if (!given[i] && !params[i].default_value())
        fail(node.column, qualified(node) + " needs argument '" + params[i].name() + "' (" + params[i].type()->str() + ")");
    return schema;
  }

  static std::string param_names(const std::vector<c10::Argument>& params) {
    std::string out;
    for (const auto& p : params) out += (out.empty() ? "" : ", ") + p.name();
    return out.empty() ? "none" : out;
  }

  const std::string& text_;
  const FormulaScope& scope_;
};

// The overloads of op `name` the dispatcher has schemas for (messages only: it walks every op).
std::vector<std::string> dispatcher_overloads(const std::string& name) {
  std::vector<std::string> out;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames())
    if (op.name == name && c10::Dispatcher::singleton().findSchema(op)) out.push_back(op.overload_name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<c10::TypePtr> ReferenceExpr::check(const FormulaScope& scope) const {
  return Checker(text_, scope).all(*root_);
}

FormulaScope FormulaScope::dispatcher(std::map<std::string, c10::TypePtr> names) {
  FormulaScope scope;
  scope.names = std::move(names);
  scope.schema = [](const std::string& name, const std::string& overload) -> std::optional<c10::FunctionSchema> {
    auto handle = c10::Dispatcher::singleton().findSchema(c10::OperatorName(name, overload));
    if (!handle) return std::nullopt;
    return handle->schema();
  };
  scope.overloads = dispatcher_overloads;
  return scope;
}

}  // namespace backplane::conformance
