// Parses registry YAML into OpDefs. Every error names file:line:column and says
// what was expected and what was found.
#include <backplane/reference_expr.h>
#include <backplane/registry.h>

#include "op_checks_parse.h"
#include "shape_rules/shape_rules.h"
#include "yaml_location.h"
#include "yaml_strict.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace backplane {
namespace {

using detail::at;
using detail::kind_name;

bool python_keyword(const std::string& name) {
  static const std::set<std::string> keywords = {
      "False", "None",  "True",  "and",    "as",       "assert", "async", "await",  "break",
      "class", "continue", "def", "del",   "elif",     "else",   "except", "finally", "for",
      "from",  "global", "if",   "import", "in",       "is",     "lambda", "nonlocal", "not",
      "or",    "pass",  "raise", "return", "try",      "while",  "with",  "yield"};
  return keywords.count(name) > 0;
}

// Why a fragment may not use namespace `ns` (empty: it may). The dispatcher knows the
// namespaces of PyTorch's C++ libraries only once they are loaded, and those its Python
// modules define only once imported (quantized_decomposed), so PyTorch's are listed here
// (tests/python/test_hardening_registry.py compares the list with this torch's);
// vendor_ops.cpp also asks the dispatcher, for every other library loaded.
std::string reserved_namespace(const std::string& ns) {
  static const std::set<std::string> pytorch_own = {
      "aten", "ao", "bucketing", "c10d", "c10d_functional", "coor", "cplib", "debug_mode_ops", "debugprims", "device_mesh",
      "export", "flex_lib", "fsdp", "higher_order", "inductor", "inductor_prims", "mempool", "mkl", "mkldnn",
      "mkldnn_prepacked", "onednn", "onnx", "onnx_symbolic", "pippy", "prepacked", "prim", "prims", "profiler", "quantization",
      "quantized", "quantized_decomposed", "rngprims", "semi_structured", "sparse", "static_runtime", "streams",
      "symm_mem", "torch", "torch_attn", "triton"};
  // Attributes of torch.ops itself: torch.ops.<ns> would be them, not the namespace.
  static const std::set<std::string> torch_ops_attributes = {"import_module", "load_library", "loaded_libraries"};
  if (pytorch_own.count(ns)) return "belongs to PyTorch";
  if (ns[0] == '_') return "starts with '_', which marks PyTorch's private namespaces (_c10d_functional, _quantized)";
  if (torch_ops_attributes.count(ns)) return "is an attribute of torch.ops, so torch.ops." + ns + " is not the namespace";
  if (python_keyword(ns)) return "is a Python keyword, so torch.ops." + ns + " does not parse";
  return "";
}

// Why an op may not be named `name` (empty: it may): torch.ops.<ns>.<name> must reach it.
std::string reserved_op_name(const std::string& name) {
  if (python_keyword(name)) return "is a Python keyword, so torch.ops.<namespace>." + name + " does not parse";
  // Attributes every torch.ops namespace has (torch/_ops.py's _OpNamespace, a module).
  if (name == "name" || name == "_dir" || (name.size() > 4 && name.rfind("__", 0) == 0 && name.substr(name.size() - 2) == "__"))
    return "is an attribute of every torch.ops namespace, so torch.ops.<namespace>." + name + " is not the op";
  return "";
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// "x, weight" -> {x, weight}; an empty name (",x") makes the list empty: an error.
std::vector<std::string> split_names(const std::string& key) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t comma = key.find(',', start);
    std::string name = key.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name.empty()) return {};
    names.push_back(name);
    if (comma == std::string::npos) return names;
    start = comma + 1;
  }
}

class OpParser {
 public:
  OpParser(const std::string& file, const YAML::Node& node) : file_(file), node_(node) {}

  OpDef parse() {
    expect_kind(node_, YAML::NodeType::Map, "an op: a mapping with schema, doc, dtypes and shape");
    check_keys();
    op_.where = at(file_, node_);
    parse_schema(required("schema"));
    parse_doc(required("doc"));
    parse_dtypes(required("dtypes"));
    parse_shape(required("shape"));
    detail::parse_op_checks(file_, node_, op_);
    if (const YAML::Node backward = node_["backward"]) parse_backward(backward);
    if (const YAML::Node autocast = node_["autocast"]) parse_autocast(autocast);
    return std::move(op_);
  }

 private:
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw RegistryError(at(file_, node), message);
  }

  void expect_kind(const YAML::Node& node, YAML::NodeType::value kind, const char* expected) const {
    if (node.Type() != kind) fail(node, std::string("expected ") + expected + ", found " + kind_name(node));
  }

  std::string scalar(const YAML::Node& node, const char* what) const {
    if (!node.IsScalar()) fail(node, std::string("expected ") + what + " (a string), found " + kind_name(node));
    return node.Scalar();
  }

  YAML::Node required(const char* key) const {
    YAML::Node node = node_[key];
    if (!node) {
      std::string name = op_.name.empty() ? "" : " '" + op_.name + "'";
      fail(node_, "op" + name + " is missing required key '" + key + "'");
    }
    return node;
  }

  void check_keys() const {
    static const std::set<std::string> known = [] {
      std::set<std::string> keys = {"schema", "doc", "dtypes", "shape", "backward", "autocast"};
      keys.insert(std::begin(detail::kOpCheckKeys), std::end(detail::kOpCheckKeys));
      return keys;
    }();
    static const std::set<std::string> reserved = {"backends"};
    for (const auto& entry : node_) {
      const std::string key = scalar(entry.first, "a key");
      if (reserved.count(key)) fail(entry.first, "key '" + key + "' is reserved for later work and not supported yet");
      if (!known.count(key)) fail(entry.first, "unknown key '" + key + "'; expected one of: " + join({known.begin(), known.end()}));
    }
  }

  // `backward:` maps a Tensor argument to its gradient formula, or several arguments
  // ("x, weight") to one call returning their gradients in that order.
  void parse_backward(const YAML::Node& node) {
    expect_kind(node, YAML::NodeType::Map,
                "backward: a mapping of Tensor argument (or \"a, b\" for a call returning both gradients) -> formula");
    if (op_.writes())
      fail(node, "backward of '" + op_.name + "': derivatives of ops that write an argument are not supported yet");
    for (const auto& entry : node) {
      const std::string key = scalar(entry.first, "an argument name");
      const std::vector<std::string> args = split_names(key);
      if (args.empty()) fail(entry.first, "backward of '" + op_.name + "' has an empty key; expected a Tensor argument");
      for (const std::string& arg : args) {
        if (std::find(op_.tensor_args.begin(), op_.tensor_args.end(), arg) == op_.tensor_args.end())
          fail(entry.first, "backward of '" + op_.name + "' names '" + arg + "', which is not a Tensor argument; "
                            "expected one of: " + join(op_.tensor_args));
        if (op_.backward.count(arg))
          fail(entry.first, "backward of '" + op_.name + "' gives '" + arg + "' a gradient twice");
      }
      const std::string formula = scalar(entry.second, "a gradient formula");  // checked by FormulaChecker
      for (size_t i = 0; i < args.size(); ++i) op_.backward[args[i]] = GradientFormula{formula, i, args.size()};
    }
  }

  // `autocast:` names the dtype the op runs in under torch.autocast (registry.h's
  // AutocastRule). An op that writes an argument follows that argument's dtype instead.
  void parse_autocast(const YAML::Node& node) {
    static const std::map<std::string, AutocastRule> rules = {
        {"fp32", AutocastRule::Fp32}, {"lower", AutocastRule::Lower}, {"promote", AutocastRule::Promote}};
    const std::string value = node.IsScalar() ? node.Scalar() : "";
    const auto rule = rules.find(value);
    if (rule == rules.end())
      fail(node, "op '" + op_.name + "': key 'autocast' is " + (node.IsScalar() ? "'" + value + "'" : kind_name(node)) +
                     "; expected one of: fp32, lower, promote");
    if (op_.writes())
      fail(node, "op '" + op_.name + "': key 'autocast' does not apply to an op that writes an argument; under "
                     "autocast its other floating inputs take the written argument's dtype. Remove the key");
    // The dtypes the rule casts to must be ones the op takes, or every call under
    // autocast fails in the op contract: say so here, at load.
    auto takes = [&](c10::ScalarType dtype) {
      return std::find(op_.dtypes.begin(), op_.dtypes.end(), dtype) != op_.dtypes.end();
    };
    if (rule->second == AutocastRule::Fp32 && !takes(c10::kFloat))
      fail(node, "op '" + op_.name + "': key 'autocast' is 'fp32', but its dtypes lack float32; expected float32 "
                     "in dtypes, or another rule");
    if (rule->second == AutocastRule::Lower && !(takes(c10::kHalf) && takes(c10::kBFloat16)))
      fail(node, "op '" + op_.name + "': key 'autocast' is 'lower' (the autocast dtype: float16 or bfloat16), but "
                     "its dtypes lack " + (takes(c10::kHalf) ? "bfloat16" : "float16") +
                     "; expected both in dtypes, or another rule");
    op_.autocast = rule->second;
  }

  void parse_schema(const YAML::Node& node) {
    op_.schema = scalar(node, "a schema");
    c10::FunctionSchema schema = [&] {
      try {
        return torch::jit::parseSchema(op_.schema);
      } catch (const c10::Error& e) {
        fail(node, "bad schema '" + op_.schema + "': " + first_line(e.what_without_backtrace()));
      } catch (const std::exception& e) {
        fail(node, "bad schema '" + op_.schema + "': " + first_line(e.what()));
      }
    }();
    if (schema.name().find("::") != std::string::npos)
      fail(node, "schema '" + op_.schema + "' names a namespace; write it without one (the namespace is the "
                     "document's `namespace:`, '" + std::string(kNamespace) + "' by default)");
    if (!schema.overload_name().empty())
      fail(node, "schema '" + op_.schema + "' has an overload name ('" + schema.overload_name() +
                     "'); overloads are not supported, give the op its own name");
    op_.name = schema.name();
    if (const std::string why = reserved_op_name(op_.name); !why.empty())
      fail(node, "op name '" + op_.name + "' " + why + "; give the op another name");
    op_.arguments = schema.arguments();
    for (const auto& arg : schema.arguments()) {
      if (op_.arg_index(arg.name()) >= 0)  // parseSchema accepts it; arg_index would find only the first
        fail(node, "schema '" + op_.schema + "' has two arguments named '" + arg.name() + "'");
      op_.arg_names.push_back(arg.name());
      if (arg.type()->kind() == c10::TypeKind::TensorType) op_.tensor_args.push_back(arg.name());
      if (arg.alias_info() && arg.alias_info()->isWrite()) mutated_.push_back(arg.name());
    }
    returns_ = schema.returns().size();
    returns_tensors_ = std::count_if(schema.returns().begin(), schema.returns().end(), [](const c10::Argument& r) {
      return r.type()->kind() == c10::TypeKind::TensorType;
    });
    if (op_.tensor_args.empty()) fail(node, "schema '" + op_.schema + "' has no Tensor argument; every op needs one");
  }

  static std::string first_line(const std::string& text) {
    std::string out = text.substr(0, text.find('\n'));
    return out.empty() ? text : out;
  }

  void parse_doc(const YAML::Node& node) {
    op_.doc = scalar(node, "a one-line doc");
    if (op_.doc.empty() || op_.doc.find('\n') != std::string::npos)
      fail(node, "doc of '" + op_.name + "' must be one non-empty line");
  }

  void parse_dtypes(const YAML::Node& node) {
    expect_kind(node, YAML::NodeType::Sequence, "a list of dtypes such as [float32, bfloat16]");
    if (node.size() == 0) fail(node, "dtypes of '" + op_.name + "' is empty; list at least one dtype");
    for (const auto& item : node) {
      const std::string name = scalar(item, "a dtype name");
      auto it = dtype_names().find(name);
      if (it == dtype_names().end()) {
        std::vector<std::string> known;
        for (const auto& [n, _] : dtype_names()) known.push_back(n);
        fail(item, "unknown dtype '" + name + "'; expected one of: " + join(known));
      }
      if (op_.supports(it->second)) fail(item, "dtype '" + name + "' is listed twice");
      op_.dtypes.push_back(it->second);
    }
  }

  std::string tensor_arg(const YAML::Node& node, const std::string& rule) const {
    const std::string name = scalar(node, "an argument name");
    if (op_.arg_index(name) < 0)
      fail(node, "shape rule '" + rule + "' names argument '" + name + "', but '" + op_.name +
                     "' has arguments: " + join(op_.arg_names));
    if (std::find(op_.tensor_args.begin(), op_.tensor_args.end(), name) == op_.tensor_args.end())
      fail(node, "shape rule '" + rule + "' names argument '" + name + "', which is not a Tensor");
    return name;
  }

  // One rule, or for an op returning several tensors a list of rules, one per return.
  void parse_shape(const YAML::Node& node) {
    if (node.IsSequence()) {
      if (node.size() < 2)
        fail(node, "shape of '" + op_.name + "' is a list of " + std::to_string(node.size()) +
                       " rule(s); a list gives one rule per output of an op returning several tensors (2 or more), "
                       "else write the rule itself");
      for (size_t i = 0; i < node.size(); ++i) {
        ShapeRule rule = parse_rule(node[i]);
        if (rule.kind == ShapeRuleKind::InPlace || rule.kind == ShapeRuleKind::Out)
          fail(node[i], "output " + std::to_string(i) + " of '" + op_.name +
                            "': an op returning several tensors writes no argument; use same_as, broadcast or custom");
        (i == 0 ? op_.shape : op_.extra_outputs.emplace_back()) = std::move(rule);
      }
    } else {
      op_.shape = parse_rule(node);
    }
    check_rule_matches_schema(node);
  }

  ShapeRule parse_rule(const YAML::Node& node) {
    expect_kind(node, YAML::NodeType::Map,
                "a shape rule: one of {same_as: x}, {broadcast: [a, b]}, {in_place: x}, {out: o, like: x}, "
                "{custom: name}, or a list of such rules, one per output");
    ShapeRule rule;
    std::vector<std::string> keys;
    for (const auto& entry : node) keys.push_back(scalar(entry.first, "a rule name"));
    auto only = [&](std::vector<std::string> allowed) {
      std::sort(keys.begin(), keys.end());
      std::sort(allowed.begin(), allowed.end());
      if (keys != allowed)
        fail(node, "shape rule of '" + op_.name + "' has keys [" + join(keys) + "]; expected exactly [" +
                       join(allowed) + "]");
    };
    if (node["same_as"]) {
      only({"same_as"});
      rule.kind = ShapeRuleKind::SameAs;
      rule.args = {tensor_arg(node["same_as"], "same_as")};
    } else if (node["broadcast"]) {
      only({"broadcast"});
      const YAML::Node list = node["broadcast"];
      expect_kind(list, YAML::NodeType::Sequence, "a list of two or more Tensor arguments");
      if (list.size() < 2) fail(list, "broadcast takes two or more arguments, found " + std::to_string(list.size()));
      rule.kind = ShapeRuleKind::Broadcast;
      for (const auto& item : list) rule.args.push_back(tensor_arg(item, "broadcast"));
    } else if (node["in_place"]) {
      only({"in_place"});
      rule.kind = ShapeRuleKind::InPlace;
      rule.args = {tensor_arg(node["in_place"], "in_place")};
    } else if (node["out"]) {
      only({"like", "out"});
      rule.kind = ShapeRuleKind::Out;
      rule.args = {tensor_arg(node["out"], "out"), tensor_arg(node["like"], "like")};
    } else if (node["custom"]) {
      only({"custom"});
      rule.kind = ShapeRuleKind::Custom;
      rule.custom = scalar(node["custom"], "a custom rule name");
      if (!find_custom_shape_rule(rule.custom))
        fail(node["custom"], "unknown custom shape rule '" + rule.custom + "'; core has: " + join(custom_shape_rule_names()));
    } else {
      fail(node, "unknown shape rule [" + join(keys) + "]; expected one of: same_as, broadcast, in_place, out, custom");
    }
    return rule;
  }

  // The schema declares mutation and returns; the rule must agree with it, or the
  // Meta kernel and functionalization would disagree about what the op does.
  void check_rule_matches_schema(const YAML::Node& node) const {
    const ShapeRule& rule = op_.shape;
    const bool mutating_rule = rule.kind == ShapeRuleKind::InPlace || rule.kind == ShapeRuleKind::Out;
    if (mutating_rule) {
      const std::string& target = rule.args[0];
      if (mutated_.size() != 1 || mutated_[0] != target)
        fail(node, "shape rule mutates '" + target + "', but the schema of '" + op_.name +
                       "' marks [" + join(mutated_) + "] as written (Tensor(a!))");
    } else if (!mutated_.empty()) {
      fail(node, "schema of '" + op_.name + "' writes [" + join(mutated_) +
                     "]; use an in_place or out shape rule for it");
    }
    // PyTorch can only functionalize (for torch.compile and torch.export) custom ops
    // whose outputs alias no input, so ops that write return nothing.
    if (mutating_rule && returns_ != 0)
      fail(node, "'" + op_.name + "' writes '" + rule.args[0] + "', so it must return nothing (-> ()): torch.compile and "
                     "torch.export cannot functionalize a custom op whose output aliases an input; found " +
                     std::to_string(returns_) + " return value(s)");
    if (!mutating_rule && (returns_ != op_.new_outputs() || returns_tensors_ != returns_)) {
      const size_t n = op_.new_outputs();
      fail(node, "shape of '" + op_.name + "' gives " + std::to_string(n) + " output(s); the schema must return " +
                     (n == 1 ? std::string("exactly one Tensor") : "exactly " + std::to_string(n) + " Tensors, (Tensor, Tensor, ...)") +
                     ", found " + std::to_string(returns_) + " return value(s) of which " + std::to_string(returns_tensors_) +
                     " Tensor(s)");
    }
  }

  const std::string& file_;
  const YAML::Node& node_;
  OpDef op_;
  std::vector<std::string> mutated_;
  size_t returns_ = 0;
  size_t returns_tensors_ = 0;
};

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

Registry parse_registry(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw RegistryError({file, e.mark.line + 1, e.mark.column + 1}, "invalid YAML: " + e.msg);
  }
  if (auto problem = detail::find_duplicate_key(root)) throw RegistryError(at(file, problem->node), problem->message);
  if (!root.IsMap())
    throw RegistryError(at(file, root), std::string("expected a mapping with an 'ops' or 'classes' list at the top, found ") +
                                            kind_name(root));
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (key != "ops" && key != "classes" && key != "namespace")
      throw RegistryError(at(file, entry.first), "unknown top-level key '" + key + "'; expected: namespace, ops, classes");
  }
  std::string ns = kNamespace;
  if (const YAML::Node given = root["namespace"]) {
    ns = given.IsScalar() ? given.Scalar() : "";
    bool identifier = !ns.empty() && (std::islower(static_cast<unsigned char>(ns[0])) || ns[0] == '_');
    for (char c : ns)
      identifier = identifier && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    if (!identifier)
      throw RegistryError(at(file, given), "namespace '" + ns + "' should be a lower-case identifier such as acme " +
                                               "([a-z_][a-z0-9_]*), found " + (given.IsScalar() ? "'" + ns + "'" : kind_name(given)));
    if (const std::string why = reserved_namespace(ns); !why.empty())
      throw RegistryError(at(file, given), "namespace '" + ns + "' " + why + "; give your ops a namespace of your own");
  }
  Registry out;
  const YAML::Node ops = root["ops"];
  const YAML::Node classes = root["classes"];
  if (!ops && !classes) throw RegistryError(at(file, root), "expected a top-level 'ops' or 'classes' list, found neither");
  if (ops) {
    if (!ops.IsSequence())
      throw RegistryError(at(file, ops), std::string("expected 'ops' to be a list, found ") + kind_name(ops));
    for (const auto& node : ops) {
      OpDef op = OpParser(file, node).parse();
      op.ns = ns;
      out.add(std::move(op));
    }
    const FormulaChecker formulas(file, text, ns, out);
    for (size_t i = 0; i < ops.size(); ++i) formulas.check(ops[i], out.ops()[i]);
  }
  if (classes) {
    if (!classes.IsSequence())
      throw RegistryError(at(file, classes), std::string("expected 'classes' to be a list, found ") + kind_name(classes));
    for (const auto& node : classes) out.add_class(detail::parse_class(file, node));
  }
  return out;
}

}  // namespace backplane
