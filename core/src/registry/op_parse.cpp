// An op entry: schema, doc, dtypes, shape rule(s), checks, backward, autocast and sharding keys.
// Every error names file:line:column and says what was expected and what was found.
#include "registry/op_parse.h"

#include "registry/custom_shape_rules.h"
#include "registry/op_checks_parse.h"
#include "registry/reserved_names.h"
#include "registry/sharding_parse.h"
#include "registry/yaml_location.h"
#include "util/strings.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <algorithm>
#include <map>
#include <set>

namespace backplane::detail {
namespace {

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
    if (const YAML::Node choices = node_["choices"]) parse_choices(choices);  // before samples, which must keep to them
    detail::parse_op_checks(file_, node_, op_);
    if (const YAML::Node backward = node_["backward"]) parse_backward(backward);
    if (const YAML::Node autocast = node_["autocast"]) parse_autocast(autocast);
    if (const YAML::Node sharding = node_["sharding"]) parse_sharding(file_, sharding, op_);
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
      std::set<std::string> keys = {"schema", "doc", "dtypes", "shape", "choices", "backward", "autocast", "sharding"};
      keys.insert(std::begin(detail::kOpCheckKeys), std::end(detail::kOpCheckKeys));
      return keys;
    }();
    static const std::set<std::string> reserved = {"backends"};
    for (const auto& entry : node_) {
      const std::string key = scalar(entry.first, "a key");
      if (reserved.count(key)) fail(entry.first, "key '" + key + "' is reserved for later work and not supported yet");
      if (!known.count(key)) fail(entry.first, "unknown key '" + key + "'; expected one of: " + join(known));
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
      for (size_t i = 0; i < args.size(); ++i)
        op_.backward[args[i]] = GradientFormula{formula, i, args.size(), at(file_, entry.second)};
    }
  }

  // `choices:` maps a str argument to the values it may take (registry.h). The schema's
  // default must be one of them, or a call that leaves the argument out would be refused.
  void parse_choices(const YAML::Node& node) {
    expect_kind(node, YAML::NodeType::Map, "choices: a mapping of str argument -> its values, e.g. {approximate: [none, tanh]}");
    std::vector<std::string> strings;  // the op's str arguments, for messages
    for (const auto& arg : op_.arguments)
      if (is_string(arg)) strings.push_back(arg.name());
    for (const auto& entry : node) {
      const std::string name = scalar(entry.first, "an argument name");
      const int index = op_.arg_index(name);
      if (index < 0 || !is_string(op_.arguments[index]))
        fail(entry.first, "choices of '" + op_.name + "' names '" + name + "', which is not a str argument; expected " +
                              (strings.empty() ? std::string("none: the op has no str argument") : "one of: " + join(strings)));
      if (!entry.second.IsSequence() || entry.second.size() == 0)
        fail(entry.second, "choices of '" + name + "' must be a non-empty list of strings, found " +
                               (entry.second.IsSequence() ? std::string("an empty list") : kind_name(entry.second)));
      std::vector<std::string>& values = op_.choices[name];
      for (const auto& item : entry.second) {
        const std::string value = scalar(item, "a choice");
        if (std::find(values.begin(), values.end(), value) != values.end())
          fail(item, "choices of '" + name + "' list '" + value + "' twice");
        values.push_back(value);
      }
      const auto& fallback = op_.arguments[index].default_value();
      if (fallback && fallback->isString() &&
          std::find(values.begin(), values.end(), fallback->toStringRef()) == values.end())
        fail(entry.second, "choices of '" + name + "' lack its schema default '" + fallback->toStringRef() + "'; expected it among: " + join(values));
    }
  }

  // str, or str? (an optional string: None is always allowed).
  static bool is_string(const c10::Argument& arg) {
    c10::TypePtr type = arg.type();
    if (type->kind() == c10::TypeKind::OptionalType) type = type->castRaw<c10::OptionalType>()->getElementType();
    return type->kind() == c10::TypeKind::StringType;
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
                "{custom: name} (optionally with layout: x), or a list of such rules, one per output");
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
      if (node["layout"])
        only({"custom", "layout"});
      else
        only({"custom"});
      rule.kind = ShapeRuleKind::Custom;
      rule.custom = scalar(node["custom"], "a custom rule name");
      if (!find_custom_shape_rule(rule.custom))
        fail(node["custom"], "unknown custom shape rule '" + rule.custom + "'; core has: " + join(custom_shape_rule_names()));
      if (node["layout"]) rule.args = {tensor_arg(node["layout"], "layout")};
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

}  // namespace

OpDef parse_op(const std::string& file, const YAML::Node& node) { return OpParser(file, node).parse(); }

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

}  // namespace backplane::detail
