#include "registry/document_formulas.h"

#include "registry/op_parse.h"
#include "registry/yaml_location.h"

#include "formula/reference_expr.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <algorithm>
#include <optional>

namespace backplane::detail {
namespace {

// Every formula of a document (reference, baseline, backward), parsed and checked once all
// its ops are known: a backward formula may call an op defined further down. A call of
// the document's own namespace resolves to its ops, any other to the dispatcher's schemas,
// so a formula may call PyTorch's ops, the document's, and those of libraries already loaded.
class FormulaChecker {
 public:
  FormulaChecker(const std::string& file, const std::string& text, const std::string& ns, const Registry& doc)
      : file_(file), text_(text), ns_(ns), doc_(doc) {}

  void check(const YAML::Node& node, const OpDef& op) const {
    const size_t outputs = std::max<size_t>(op.new_outputs(), 1);
    if (const YAML::Node ref = node["reference"]) check_value(ref, "reference of '" + op.name + "'", op, outputs);
    if (const YAML::Node base = node["baseline"]) check_value(base, "baseline of '" + op.name + "'", op, outputs);
    if (const YAML::Node backward = node["backward"])
      for (const auto& entry : backward) {
        const std::string key = entry.first.Scalar();
        check_gradient(entry.second, "backward of '" + op.name + "' for '" + key + "'", op, split_names(key).size());
      }
  }

 private:
  // A reference or baseline: one value per output (evaluate(): a call's first value where
  // the op has one output; evaluate_all() where it has several).
  void check_value(const YAML::Node& node, const std::string& what, const OpDef& op, size_t outputs) const {
    const std::string& text = node.Scalar();
    const std::vector<c10::TypePtr> types = checked(node, what, op, {});
    const bool list = text.find_first_not_of(" \t") != std::string::npos && text[text.find_first_not_of(" \t")] == '[';
    if (outputs == 1 && list)
      fail(node, 1, what + " is a list; an op with one output has one reference (a list gives one per output)");
    if (outputs > 1 && types.size() != outputs)
      fail(node, 1, what + " gives " + std::to_string(types.size()) + " value(s) for the op's " + std::to_string(outputs) +
                        " outputs (several outputs: a list [a, b] of their references)");
    expect_tensors(node, what, types, outputs);
  }

  // A `backward:` formula for a key naming `args` arguments: one gradient per argument (a
  // key naming one: the first value).
  void check_gradient(const YAML::Node& node, const std::string& what, const OpDef& op, size_t args) const {
    const std::vector<c10::TypePtr> types = checked(node, what, op, {"grad", "result"});
    if (args > 1 && types.size() != args)
      fail(node, 1, what + " gives " + std::to_string(types.size()) + " value(s); a key naming " + std::to_string(args) +
                        " arguments needs a call giving one gradient per argument, in the key's order");
    expect_tensors(node, what, types, args);
  }

  void expect_tensors(const YAML::Node& node, const std::string& what, const std::vector<c10::TypePtr>& types,
                      size_t count) const {
    if (types.empty()) fail(node, 1, what + " gives no value");
    for (size_t i = 0; i < count && i < types.size(); ++i)
      if (!types[i] || types[i]->kind() != c10::TypeKind::TensorType)
        fail(node, 1, what + " gives " + (types[i] ? types[i]->str() : std::string("an empty list")) +
                          (count > 1 ? " as value " + std::to_string(i) : std::string()) + ", not a Tensor");
  }

  // Parses and checks the formula; its types (conformance::ReferenceExpr::check).
  std::vector<c10::TypePtr> checked(const YAML::Node& node, const std::string& what, const OpDef& op,
                                    const std::vector<std::string>& tensors) const {
    if (!node.IsScalar() || node.Scalar().empty())
      throw RegistryError(at(file_, node), what + " must be a call such as aten::add.Tensor(a, b), found " + kind_name(node));
    conformance::FormulaScope scope;
    for (const auto& arg : op.arguments) scope.names[arg.name()] = arg.type();
    for (const auto& name : tensors) scope.names.emplace(name, c10::TensorType::get());
    scope.schema = [this](const std::string& name, const std::string& overload) { return schema(name, overload); };
    scope.overloads = [this](const std::string& name) { return overloads(name); };
    try {
      return conformance::ReferenceExpr::parse(node.Scalar()).check(scope);
    } catch (const conformance::FormulaError& e) {
      fail(node, e.column(), what + ": " + e.what());
    }
  }

  // The document's own op (no overloads), else the dispatcher's.
  std::optional<c10::FunctionSchema> schema(const std::string& name, const std::string& overload) const {
    if (const OpDef* own = own_op(name)) {
      if (!overload.empty()) return std::nullopt;
      return torch::jit::parseSchema(own->schema);
    }
    return dispatcher_.schema(name, overload);
  }

  std::vector<std::string> overloads(const std::string& name) const {
    if (own_op(name)) return {""};
    return dispatcher_.overloads(name);
  }

  const OpDef* own_op(const std::string& name) const {
    const std::string prefix = ns_ + "::";
    return name.compare(0, prefix.size(), prefix) == 0 ? doc_.find(name.substr(prefix.size())) : nullptr;
  }

  [[noreturn]] void fail(const YAML::Node& node, size_t column, const std::string& message) const {
    throw RegistryError(detail::at_column(file_, text_, node, column), message);
  }

  const std::string& file_;
  const std::string& text_;
  const std::string& ns_;
  const Registry& doc_;
  const conformance::FormulaScope dispatcher_ = conformance::FormulaScope::dispatcher({});
};

}  // namespace

void check_formulas(const std::string& file, const std::string& text, const std::string& ns, const YAML::Node& ops,
                    const Registry& doc) {
  const FormulaChecker formulas(file, text, ns, doc);
  for (size_t i = 0; i < ops.size(); ++i) formulas.check(ops[i], doc.ops()[i]);
}

}  // namespace backplane::detail
