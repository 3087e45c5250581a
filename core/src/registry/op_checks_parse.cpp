#include "registry/op_checks_parse.h"

#include "registry/sample_layouts.h"
#include "registry/yaml_location.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace backplane::detail {
namespace {

class ChecksParser {
 public:
  ChecksParser(const std::string& file, OpDef& op) : file_(file), op_(op) {}

  void parse(const YAML::Node& node) {
    OpChecks& checks = op_.checks;
    if (const YAML::Node ref = node["reference"]) {
      if (!ref.IsScalar() || ref.Scalar().empty())
        fail(ref, "reference of '" + op_.name + "' must be a call such as aten::add.Tensor(a, b), found " + kind_name(ref));
      checks.reference = ref.Scalar();
      checks.reference_where = at(file_, ref);
    }
    if (const YAML::Node base = node["baseline"]) {
      if (!base.IsScalar() || base.Scalar().empty())
        fail(base, "baseline of '" + op_.name + "' must be a call such as aten::rms_norm(...), found " + kind_name(base));
      checks.baseline = base.Scalar();
      checks.baseline_where = at(file_, base);
    }
    if (const YAML::Node exact = node["exact"]) checks.exact = boolean(exact, "exact");
    if (const YAML::Node tol = node["tolerance"]) parse_tolerance(tol);
    if (const YAML::Node samples = node["samples"])
      for (const auto& item : list(samples, "samples")) checks.samples.push_back(inputs(item, Kind::Sample));
    if (const YAML::Node errors = node["errors"])
      for (const auto& item : list(errors, "errors")) {
        OpErrorCase e;
        e.inputs = inputs(item, Kind::Error);
        const YAML::Node message = item["error"];
        if (!message || !message.IsScalar() || message.Scalar().empty())
          fail(item, "an entry of 'errors' needs 'error': a part of the message the op must raise");
        e.message = message.Scalar();
        checks.errors.push_back(std::move(e));
      }
    if (const YAML::Node bench = node["bench"])
      for (const auto& item : list(bench, "bench"))
        checks.bench.push_back(inputs(item, Kind::Bench));
    if (const YAML::Node flops = node["flops"]) checks.flops_per_element = flops_per_element(flops);
    if (checks.samples.empty()) default_samples(node);
    if (checks.bench.empty() && elementwise()) {
      // The first sample's other arguments, every Tensor at 1M elements.
      OpInputs bench = all_tensors({1 << 20}, "1M_elements");
      for (const auto& [name, value] : checks.samples.front().args)
        if (!bench.find(name)) bench.args.emplace_back(name, value);
      checks.bench.push_back(std::move(bench));
    }
  }

 private:
  // Which list an entry is in: each takes `name` and one key of its own.
  enum class Kind {
    Sample,  // magnitude: a factor for every Tensor argument's values
    Error,   // error: a part of the message the op must raise
    Bench,   // layout: the view every Tensor argument is made in
  };

  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw RegistryError(at(file_, node), message);
  }

  YAML::Node list(const YAML::Node& node, const char* key) const {
    if (!node.IsSequence()) fail(node, std::string("'") + key + "' of '" + op_.name + "' must be a list, found " + kind_name(node));
    return node;
  }

  bool boolean(const YAML::Node& node, const char* key) const {
    if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) return node.Scalar() == "true";
    fail(node, std::string("'") + key + "' must be true or false");
  }

  double number(const YAML::Node& node, const std::string& what) const {
    if (node.IsScalar()) {
      std::istringstream in(node.Scalar());
      double v;
      if (in >> v && in.eof()) return v;
    }
    fail(node, what + " must be a number, found '" + (node.IsScalar() ? node.Scalar() : kind_name(node)) + "'");
  }

  int64_t integer(const YAML::Node& node, const std::string& what) const {
    if (node.IsScalar()) {
      std::istringstream in(node.Scalar());
      int64_t v;
      if (in >> v && in.eof()) return v;
    }
    fail(node, what + " must be an integer, found '" + (node.IsScalar() ? node.Scalar() : kind_name(node)) + "'");
  }

  std::vector<int64_t> int_list(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence()) fail(node, what + " must be a list of integers, found " + kind_name(node));
    std::vector<int64_t> out;
    for (const auto& item : node) out.push_back(integer(item, what + "'s entry"));
    return out;
  }

  void parse_tolerance(const YAML::Node& node) {
    if (!node.IsMap()) fail(node, "tolerance must map dtypes to [rtol, atol], e.g. {float32: [1e-5, 1e-5]}");
    for (const auto& entry : node) {
      const std::string name = entry.first.Scalar();
      auto it = dtype_names().find(name);
      if (it == dtype_names().end()) fail(entry.first, "tolerance names unknown dtype '" + name + "'");
      if (!entry.second.IsSequence() || entry.second.size() != 2)
        fail(entry.second, "tolerance of " + name + " must be [rtol, atol]");
      op_.checks.tolerance[it->second] = {number(entry.second[0], "rtol"), number(entry.second[1], "atol")};
    }
  }

  // A str argument's value: any scalar, as written ('none' and none alike). Samples and
  // bench presets keep to the op's `choices:`; an error case may leave them (that is
  // what it tests).
  std::string str_value(const YAML::Node& node, const std::string& arg, Kind kind) const {
    if (!node.IsScalar()) fail(node, "argument '" + arg + "' must be a string, found " + kind_name(node));
    const std::string& value = node.Scalar();
    const auto choices = op_.choices.find(arg);
    if (kind != Kind::Error && choices != op_.choices.end() &&
        std::find(choices->second.begin(), choices->second.end(), value) == choices->second.end()) {
      std::string known;
      for (const auto& c : choices->second) known += (known.empty() ? "" : ", ") + c;
      fail(node, "argument '" + arg + "' is '" + value + "', which is not one of its choices (" + known +
                     "); a value the op must refuse belongs in 'errors'");
    }
    return value;
  }

  // A value of argument `arg` as the schema types it.
  c10::IValue value(const YAML::Node& node, const c10::Argument& arg, Kind kind) const {
    const std::string what = "argument '" + arg.name() + "'";
    c10::TypePtr type = arg.type();
    if (type->kind() == c10::TypeKind::OptionalType) {
      if (node.IsNull() || (node.IsScalar() && node.Scalar() == "None")) return c10::IValue();
      type = type->castRaw<c10::OptionalType>()->getElementType();
    }
    switch (type->kind()) {
      case c10::TypeKind::TensorType:
        return c10::IValue(int_list(node, what + " (a Tensor, given by its sizes)"));
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        return c10::IValue(integer(node, what));
      case c10::TypeKind::FloatType:
        return c10::IValue(number(node, what));
      case c10::TypeKind::BoolType:
        return c10::IValue(boolean(node, what.c_str()));
      case c10::TypeKind::StringType:
        return c10::IValue(str_value(node, arg.name(), kind));
      case c10::TypeKind::NumberType: {  // Scalar: keep integers integral
        if (node.IsScalar() && node.Scalar().find_first_of(".eE") == std::string::npos) return c10::IValue(integer(node, what));
        return c10::IValue(number(node, what));
      }
      case c10::TypeKind::ListType: {
        const auto elem = type->castRaw<c10::ListType>()->getElementType()->kind();
        if (elem == c10::TypeKind::IntType || elem == c10::TypeKind::SymIntType)
          return c10::IValue(int_list(node, what));
        break;
      }
      default:
        break;
    }
    fail(node, what + " has type " + arg.type()->str() + ", which registry samples cannot give yet");
  }

  OpInputs inputs(const YAML::Node& node, Kind kind) const {
    if (!node.IsMap()) fail(node, "a sample of '" + op_.name + "' is a mapping of argument names to values, found " + kind_name(node));
    OpInputs in;
    in.where = at(file_, node);
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (key == "name") {
        in.name = entry.second.Scalar();
        continue;
      }
      if (kind == Kind::Error && key == "error") continue;
      if (kind == Kind::Bench && key == "layout") {
        in.layout = layout(entry.second);
        continue;
      }
      if (key == "magnitude") {
        if (op_.arg_index(key) >= 0)  // never taken silently for the other
          fail(entry.first, "'magnitude' is an argument of this op and the key that scales a sample's values: "
                            "rename the argument");
        if (kind != Kind::Sample)
          fail(entry.first, "'magnitude' scales a sample's values; an entry of '" +
                                std::string(kind == Kind::Error ? "errors" : "bench") + "' takes none");
        in.magnitude = magnitude(entry.second);
        continue;
      }
      const int index = op_.arg_index(key);
      if (index < 0) {
        std::string known;
        for (const auto& a : op_.arg_names) known += (known.empty() ? "" : ", ") + a;
        const char* own = kind == Kind::Sample ? ", and 'name', 'magnitude'"
                          : kind == Kind::Error ? ", and 'name', 'error'"
                                                : ", and 'name', 'layout'";
        fail(entry.first, "'" + op_.name + "' has no argument '" + key + "'; its arguments: " + known + own);
      }
      in.args.emplace_back(key, value(entry.second, op_.arguments[index], kind));
    }
    for (const auto& arg : op_.arguments)
      if (!in.find(arg.name()) && (arg.type()->kind() == c10::TypeKind::TensorType || !arg.default_value()))
        fail(node, "a sample of '" + op_.name + "' must give argument '" + arg.name() + "'" +
                       (arg.type()->kind() == c10::TypeKind::TensorType ? " (a Tensor: its sizes)" : " (no default)"));
    if (in.name.empty()) in.name = describe(in);
    if (!in.layout.empty())
      for (const auto& [arg, value] : in.args)
        if (value.isIntList() && op_.arg_index(arg) >= 0 &&
            op_.arguments[op_.arg_index(arg)].type()->kind() == c10::TypeKind::TensorType &&
            !conformance::layout_fits(*conformance::layout_named(in.layout),
                                      static_cast<int64_t>(value.toIntVector().size())))
          fail(node, "bench preset '" + in.name + "': argument '" + arg + "' has " +
                         std::to_string(value.toIntVector().size()) + " dimension(s), too few for layout '" + in.layout + "'");
    return in;
  }

  double magnitude(const YAML::Node& node) const {
    const double m = number(node, "magnitude");
    if (!(m > 0) || !std::isfinite(m))
      fail(node, "magnitude must be a positive finite number (the factor every Tensor argument's values are "
                 "multiplied by), found '" + node.Scalar() + "'");
    return m;
  }

  // `flops:` a count per element, so > 0 and finite; an op of no arithmetic (a copy)
  // leaves the key out rather than giving 0, which would read as a roofline of 0%.
  double flops_per_element(const YAML::Node& node) const {
    const std::string found = node.IsScalar() ? "'" + node.Scalar() + "'" : kind_name(node);
    char* end = nullptr;
    const double f = node.IsScalar() ? std::strtod(node.Scalar().c_str(), &end) : 0;
    if (!node.IsScalar() || node.Scalar().empty() || *end != '\0' || !(f > 0) || !std::isfinite(f))
      fail(node, "flops of '" + op_.name + "' must be a number > 0: the floating-point operations per element of "
                 "its largest Tensor argument (e.g. 1 for add), found " + found);
    return f;
  }

  std::string layout(const YAML::Node& node) const {
    const std::string name = node.IsScalar() ? node.Scalar() : "";
    if (!conformance::layout_named(name) || name == "contiguous") {
      std::string known;
      for (auto l : conformance::kLayouts)
        if (l != conformance::Layout::Contiguous)
          known += std::string(known.empty() ? "" : ", ") + conformance::layout_name(l);
      fail(node, "a bench preset's layout is one of: " + known + " (contiguous is the default); found '" + name + "'");
    }
    return name;
  }

  static std::string describe(const OpInputs& in) {
    std::ostringstream out;
    for (const auto& [name, v] : in.args) out << (out.tellp() > 0 ? " " : "") << name << "=" << v;
    if (in.magnitude != 1.0) out << " magnitude=" << in.magnitude;
    return out.str();
  }

  // Every output's rule (an op may return several) is elementwise.
  bool elementwise() const {
    auto elementwise_rule = [](const ShapeRule& rule) { return rule.kind != ShapeRuleKind::Custom; };
    return elementwise_rule(op_.shape) &&
           std::all_of(op_.extra_outputs.begin(), op_.extra_outputs.end(), elementwise_rule);
  }

  // Every Tensor argument with these sizes; other arguments at their defaults.
  OpInputs all_tensors(std::vector<int64_t> sizes, std::string name) const {
    OpInputs in;
    in.name = std::move(name);
    in.where = op_.where;
    for (const auto& t : op_.tensor_args) in.args.emplace_back(t, c10::IValue(sizes));
    return in;
  }

  // Elementwise rules have obvious inputs: one shape for every Tensor argument.
  void default_samples(const YAML::Node& node) {
    const bool all_defaulted = [&] {
      for (const auto& arg : op_.arguments)
        if (arg.type()->kind() != c10::TypeKind::TensorType && !arg.default_value()) return false;
      return true;
    }();
    if (!elementwise() || !all_defaulted)
      fail(node, "'" + op_.name + "' needs 'samples': its shape rule or arguments give no default inputs (e.g. "
                 "samples: [{x: [4, 64], weight: [64]}])");
    auto& samples = op_.checks.samples;
    samples.push_back(all_tensors({4, 33}, "4x33"));
    samples.push_back(all_tensors({7}, "odd_7"));
    samples.push_back(all_tensors({3, 769}, "odd_769"));
    samples.push_back(all_tensors({}, "zero_dim"));
    samples.push_back(all_tensors({0, 5}, "empty"));
    samples.push_back(all_tensors({1 << 16}, "large"));
    samples.push_back(all_tensors({2, 3, 33}, "three_d"));  // reaches the permuted layout
  }

  const std::string& file_;
  OpDef& op_;
};

}  // namespace

void parse_op_checks(const std::string& file, const YAML::Node& node, OpDef& op) { ChecksParser(file, op).parse(node); }

}  // namespace backplane::detail
