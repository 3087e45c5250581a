#include <backplane/reference_expr.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <cctype>
#include <stdexcept>
#include <vector>

namespace backplane::conformance {

struct ReferenceExpr::Node {
  enum class Kind { Call, Name, Index, Literal, List, Dtype } kind;
  std::string name;      // Call: "aten::add"; Name/Index/Dtype: the argument
  std::string overload;  // Call
  // Call: the op, found on first evaluation (ops are never removed, and a backward formula
  // runs at every backward: no lookup each time).
  mutable std::once_flag found;
  mutable std::optional<c10::OperatorHandle> handle;
  int64_t index = 0;     // Index
  c10::IValue literal;   // Literal
  std::vector<std::pair<std::string, std::shared_ptr<const Node>>> args;  // Call (keyword or ""), List
};

namespace {

using NodePtr = std::shared_ptr<const ReferenceExpr::Node>;
using Node = ReferenceExpr::Node;

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  NodePtr parse() {
    NodePtr node = expr();
    skip();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return node;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("reference '" + text_ + "', column " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string identifier() {
    skip();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) fail("expected a name");
    return text_.substr(start, pos_ - start);
  }

  NodePtr expr() {
    skip();
    if (pos_ >= text_.size()) fail("expected an expression");
    const char c = text_[pos_];
    if (c == '[') return list();
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.') return number();
    std::string name = identifier();
    auto node = std::make_shared<Node>();
    if (name == "true" || name == "false") {
      node->kind = Node::Kind::Literal;
      node->literal = c10::IValue(name == "true");
      return node;
    }
    if (name == "None") {
      node->kind = Node::Kind::Literal;
      return node;
    }
    skip();
    if (text_.compare(pos_, 2, "::") == 0) {
      pos_ += 2;
      name += "::" + identifier();
      node->kind = Node::Kind::Call;
      node->name = name;
      if (eat('.')) node->overload = identifier();
      expect('(');
      if (!eat(')')) {
        do node->args.push_back(argument());
        while (eat(','));
        expect(')');
      }
      return node;
    }
    if (text_.compare(pos_, 1, "(") == 0) return builtin(name);
    node->name = name;
    if (eat('[')) {
      node->kind = Node::Kind::Index;
      node->index = std::stoll(number_text());
      expect(']');
    } else {
      node->kind = Node::Kind::Name;
    }
    return node;
  }

  // The one function without a namespace: dtype(t), t's dtype as a ScalarType argument
  // (aten::_softmax_backward_data's input_dtype).
  NodePtr builtin(const std::string& name) {
    if (name != "dtype")
      fail("unknown function '" + name + "'; ops name their namespace (aten::add.Tensor), and the one built-in is dtype(tensor)");
    expect('(');
    auto node = std::make_shared<Node>();
    node->kind = Node::Kind::Dtype;
    node->name = identifier();
    expect(')');
    return node;
  }

  std::pair<std::string, NodePtr> argument() {
    skip();
    const size_t start = pos_;
    if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      std::string name = identifier();
      skip();
      if (pos_ < text_.size() && text_[pos_] == '=') {
        ++pos_;
        return {name, expr()};
      }
      pos_ = start;
    }
    return {"", expr()};
  }

  NodePtr list() {
    expect('[');
    auto node = std::make_shared<Node>();
    node->kind = Node::Kind::List;
    if (!eat(']')) {
      do node->args.emplace_back("", expr());
      while (eat(','));
      expect(']');
    }
    return node;
  }

  std::string number_text() {
    skip();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   std::string_view("+-.eE").find(text_[pos_]) != std::string_view::npos))
      ++pos_;
    if (start == pos_) fail("expected a number");
    return text_.substr(start, pos_ - start);
  }

  NodePtr number() {
    const std::string t = number_text();
    auto node = std::make_shared<Node>();
    node->kind = Node::Kind::Literal;
    try {
      if (t.find_first_of(".eE") == std::string::npos)
        node->literal = c10::IValue(static_cast<int64_t>(std::stoll(t)));
      else
        node->literal = c10::IValue(std::stod(t));
    } catch (const std::exception&) {
      fail("bad number '" + t + "'");
    }
    return node;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

// A value for a schema argument: ints where an int is expected, doubles for floats.
c10::IValue coerce(const c10::IValue& v, const c10::Argument& arg) {
  const auto kind = arg.type()->kind();
  if (kind == c10::TypeKind::FloatType && v.isInt()) return c10::IValue(static_cast<double>(v.toInt()));
  return v;
}

std::vector<c10::IValue> eval_call(const Node& node, const std::map<std::string, c10::IValue>& names);

c10::IValue eval(const Node& node, const std::map<std::string, c10::IValue>& names) {
  switch (node.kind) {
    case Node::Kind::Literal:
      return node.literal;
    case Node::Kind::Name: {
      auto it = names.find(node.name);
      if (it == names.end()) throw std::invalid_argument("reference names '" + node.name + "', which is no argument of the op");
      return it->second;
    }
    case Node::Kind::Index: {
      auto it = names.find(node.name);
      if (it == names.end() || !it->second.isIntList())
        throw std::invalid_argument("reference indexes '" + node.name + "', which is no int-list argument of the op");
      const auto list = it->second.toIntVector();
      const int64_t i = node.index < 0 ? node.index + static_cast<int64_t>(list.size()) : node.index;
      if (i < 0 || i >= static_cast<int64_t>(list.size()))
        throw std::invalid_argument("reference: " + node.name + "[" + std::to_string(node.index) + "] is out of range");
      return c10::IValue(list[i]);
    }
    case Node::Kind::Dtype: {
      auto it = names.find(node.name);
      if (it == names.end() || !it->second.isTensor())
        throw std::invalid_argument("reference: dtype(" + node.name + ") names no Tensor argument of the op");
      return c10::IValue(it->second.toTensor().scalar_type());
    }
    case Node::Kind::List: {  // int[] (dims, sizes) or Tensor[] (aten::cat)
      std::vector<c10::IValue> items;
      for (const auto& [_, item] : node.args) items.push_back(eval(*item, names));
      const bool tensors = !items.empty() && std::all_of(items.begin(), items.end(), [](const c10::IValue& v) { return v.isTensor(); });
      if (tensors) {
        std::vector<at::Tensor> list;
        for (const c10::IValue& v : items) list.push_back(v.toTensor());
        return c10::IValue(list);
      }
      std::vector<int64_t> ints;
      for (const c10::IValue& v : items) {
        if (!v.isInt()) throw std::invalid_argument("reference: a list holds integers only or tensors only");
        ints.push_back(v.toInt());
      }
      return c10::IValue(ints);
    }
    case Node::Kind::Call:
      break;
  }
  return eval_call(node, names).front();
}

// Every return value of a call.
std::vector<c10::IValue> eval_call(const Node& node, const std::map<std::string, c10::IValue>& names) {
  std::call_once(node.found, [&] {
    node.handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(node.name, node.overload));
  });
  std::optional<c10::OperatorHandle> handle = node.handle;
  if (!handle)  // not defined when first evaluated: look again (a plugin may define it later)
    handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(node.name, node.overload));
  if (!handle)
    throw std::invalid_argument("reference calls " + node.name + (node.overload.empty() ? "" : "." + node.overload) +
                                ", which this torch does not have (write the overload, e.g. aten::add.Tensor)");
  const auto& schema = handle->schema();
  std::vector<c10::IValue> values(schema.arguments().size());
  std::vector<bool> given(values.size(), false);
  size_t positional = 0;
  for (const auto& [keyword, arg] : node.args) {
    size_t slot = positional;
    if (keyword.empty()) {
      ++positional;
    } else {
      auto idx = schema.argumentIndexWithName(keyword);
      if (!idx) throw std::invalid_argument("reference: " + schema.name() + " has no argument '" + keyword + "'");
      slot = *idx;
    }
    if (slot >= values.size()) throw std::invalid_argument("reference: too many arguments for " + schema.name());
    values[slot] = coerce(eval(*arg, names), schema.arguments()[slot]);
    given[slot] = true;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (given[i]) continue;
    const auto& def = schema.arguments()[i].default_value();
    if (!def) throw std::invalid_argument("reference: " + schema.name() + " needs argument '" + schema.arguments()[i].name() + "'");
    values[i] = *def;
  }
  // Multiplying a tensor by the scalar 1 gives it unchanged: no kernel, no new tensor, as
  // PyTorch's own derivatives skip it (maybe_multiply). add's gradient for b,
  // aten::mul.Scalar(grad, alpha), costs nothing at the usual alpha=1.
  // (A floating tensor and a real scalar only: anything else may change the dtype.)
  if (schema.operator_name().name == "aten::mul" && schema.overload_name() == "Scalar" && values[0].isTensor() &&
      values[0].toTensor().is_floating_point() && values[1].isScalar() && !values[1].toScalar().isComplex() &&
      !values[1].toScalar().isBoolean() && values[1].toScalar().equal(1))
    return {values[0]};
  torch::jit::Stack stack(values.begin(), values.end());
  handle->callBoxed(stack);
  if (stack.empty()) throw std::invalid_argument("reference: " + schema.name() + " returns nothing");
  return stack;
}

}  // namespace

ReferenceExpr ReferenceExpr::parse(const std::string& text) {
  ReferenceExpr e;
  e.root_ = Parser(text).parse();
  return e;
}

std::set<std::string> ReferenceExpr::names() const {
  std::set<std::string> out;
  std::vector<const Node*> pending{root_.get()};
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    if (node->kind == Node::Kind::Name || node->kind == Node::Kind::Index || node->kind == Node::Kind::Dtype)
      out.insert(node->name);
    for (const auto& [_, arg] : node->args) pending.push_back(arg.get());
  }
  return out;
}

c10::IValue ReferenceExpr::evaluate(const std::map<std::string, c10::IValue>& names) const {
  return eval(*root_, names);
}

std::vector<c10::IValue> ReferenceExpr::evaluate_all(const std::map<std::string, c10::IValue>& names) const {
  if (root_->kind == Node::Kind::Call) return eval_call(*root_, names);
  if (root_->kind == Node::Kind::List) {
    std::vector<c10::IValue> items;
    for (const auto& [_, item] : root_->args) items.push_back(eval(*item, names));
    return items;
  }
  return {eval(*root_, names)};
}

}  // namespace backplane::conformance
