#include <backplane/reference_expr.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

namespace backplane::conformance {

struct ReferenceExpr::Node {
  enum class Kind { Call, Name, Index, Literal, List, Dtype } kind;
  std::string name;      // Call: "aten::add"; Name/Index/Dtype: the argument
  std::string overload;  // Call
  size_t column = 0;     // 1-based, where the node starts in the text (for check()'s errors)
  // Call: the op, found on first evaluation (ops are never removed, and a backward formula
  // runs at every backward: no lookup each time).
  mutable std::once_flag found;
  mutable std::optional<c10::OperatorHandle> handle;
  int64_t index = 0;     // Index
  c10::IValue literal;   // Literal
  // Call: (keyword or "", its column, value); List: ("", column, item).
  struct Arg {
    std::string keyword;
    size_t column;
    std::shared_ptr<const Node> value;
  };
  std::vector<Arg> args;
};

FormulaError::FormulaError(const std::string& text, size_t column, const std::string& message)
    : std::invalid_argument("formula '" + text + "', column " + std::to_string(column) + ": " + message),
      column_(column),
      message_(message) {}

namespace {

using NodePtr = std::shared_ptr<const ReferenceExpr::Node>;
using Node = ReferenceExpr::Node;

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

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
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const { throw FormulaError(text_, pos + 1, what); }
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
    if (pos_ < text_.size() && is_name_start(text_[pos_]))
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (start == pos_) fail("expected a name");
    return text_.substr(start, pos_ - start);
  }
  std::shared_ptr<Node> node_at(Node::Kind kind, size_t start) const {
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->column = start + 1;
    return node;
  }

  // Calls and lists nest by recursion, here and in check() and evaluation: bounded, so
  // that no text can exhaust the stack (real formulas nest about 10 deep).
  static constexpr int kMaxDepth = 100;

  NodePtr expr() {
    skip();
    if (pos_ >= text_.size()) fail("expected an expression");
    if (depth_ == kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " calls or lists");
    ++depth_;
    NodePtr node = expr_here();
    --depth_;
    return node;
  }

  NodePtr expr_here() {
    const size_t start = pos_;
    const char c = text_[pos_];
    if (c == '[') return list();
    if (c == '\'' || c == '"') return string();
    if (is_digit(c) || c == '-' || c == '.') return number();
    if (!is_name_start(c)) fail("expected an expression, found '" + std::string(1, c) + "'");
    std::string name = identifier();
    skip();
    if (text_.compare(pos_, 2, "::") == 0) return call(std::move(name), start);
    if (name == "true" || name == "false") {
      auto node = node_at(Node::Kind::Literal, start);
      node->literal = c10::IValue(name == "true");
      return node;
    }
    if (name == "None") return node_at(Node::Kind::Literal, start);
    if (pos_ < text_.size() && text_[pos_] == '(') return builtin(name, start);
    if (eat('[')) {
      auto node = node_at(Node::Kind::Index, start);
      node->name = name;
      node->index = index();
      expect(']');
      return node;
    }
    auto node = node_at(Node::Kind::Name, start);
    node->name = name;
    return node;
  }

  NodePtr call(std::string name, size_t start) {
    pos_ += 2;  // "::"
    auto node = node_at(Node::Kind::Call, start);
    node->name = name + "::" + identifier();
    if (eat('.')) node->overload = identifier();
    expect('(');
    if (!eat(')')) {
      do node->args.push_back(argument());
      while (eat(','));
      expect(')');
    }
    return node;
  }

  // The one function without a namespace: dtype(t), t's dtype as a ScalarType argument
  // (aten::_softmax_backward_data's input_dtype).
  NodePtr builtin(const std::string& name, size_t start) {
    if (name != "dtype")
      fail_at(start, "unknown function '" + name + "'; ops name their namespace (aten::add.Tensor), and the one "
                     "built-in is dtype(tensor)");
    expect('(');
    auto node = node_at(Node::Kind::Dtype, start);
    skip();
    node->column = pos_ + 1;  // check() names the argument
    node->name = identifier();
    expect(')');
    return node;
  }

  Node::Arg argument() {
    skip();
    const size_t start = pos_;
    if (pos_ < text_.size() && is_name_start(text_[pos_])) {
      std::string name = identifier();
      skip();
      if (pos_ < text_.size() && text_[pos_] == '=') {
        ++pos_;
        return {name, start + 1, expr()};
      }
      pos_ = start;
    }
    return {"", start + 1, expr()};
  }

  NodePtr list() {
    auto node = node_at(Node::Kind::List, pos_);
    expect('[');
    if (!eat(']')) {
      do {
        skip();
        const size_t start = pos_;
        node->args.push_back({"", start + 1, expr()});
      } while (eat(','));
      expect(']');
    }
    return node;
  }

  // '...' or "...": no escapes, so a string cannot hold its own quote.
  NodePtr string() {
    const size_t start = pos_;
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, start + 1);
    if (end == std::string::npos) fail_at(start, std::string("unterminated string: no closing ") + quote);
    auto node = node_at(Node::Kind::Literal, start);
    node->literal = c10::IValue(text_.substr(start + 1, end - start - 1));
    pos_ = end + 1;
    return node;
  }

  // -?(digits[.digits?] | .digits)([eE][+-]?digits)?, as formula.py's tokenizer reads it.
  std::string number_text() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      return pos_ > from;
    };
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    bool mantissa = digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      mantissa = digits() || mantissa;
    }
    if (!mantissa) fail_at(start, "expected a number");
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) fail_at(start, "bad number '" + text_.substr(start, pos_ - start) + "'");
    }
    return text_.substr(start, pos_ - start);
  }

  NodePtr number() {
    const size_t start = pos_;
    const std::string t = number_text();
    auto node = node_at(Node::Kind::Literal, start);
    if (t.find_first_of(".eE") == std::string::npos)
      node->literal = c10::IValue(integer(t, start));
    else
      node->literal = c10::IValue(std::strtod(t.c_str(), nullptr));  // the grammar above: always a number
    return node;
  }

  int64_t integer(const std::string& t, size_t start) const {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail_at(start, "integer '" + t + "' is out of range");
    return v;
  }

  int64_t index() {
    skip();
    const size_t start = pos_;
    const std::string t = number_text();
    if (t.find_first_of(".eE") != std::string::npos) fail_at(start, "an index is an integer, found '" + t + "'");
    return integer(t, start);
  }

  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
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
      for (const auto& item : node.args) items.push_back(eval(*item.value, names));
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
  for (const auto& [keyword, _, arg] : node.args) {
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

ReferenceExpr ReferenceExpr::parse(const std::string& text) {
  ReferenceExpr e;
  e.text_ = text;
  e.root_ = Parser(e.text_).parse();
  return e;
}

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

std::set<std::string> ReferenceExpr::names() const {
  std::set<std::string> out;
  std::vector<const Node*> pending{root_.get()};
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    if (node->kind == Node::Kind::Name || node->kind == Node::Kind::Index || node->kind == Node::Kind::Dtype)
      out.insert(node->name);
    for (const auto& arg : node->args) pending.push_back(arg.value.get());
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
    for (const auto& item : root_->args) items.push_back(eval(*item.value, names));
    return items;
  }
  return {eval(*root_, names)};
}

}  // namespace backplane::conformance
