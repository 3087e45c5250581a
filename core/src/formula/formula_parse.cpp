// The registry's formula grammar (formula/reference_expr.h): text to a tree of Nodes.
#include "formula/formula_node.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace backplane::conformance {

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

}  // namespace

ReferenceExpr ReferenceExpr::parse(const std::string& text) {
  ReferenceExpr e;
  e.text_ = text;
  e.root_ = Parser(e.text_).parse();
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
    for (const auto& arg : node->args) pending.push_back(arg.value.get());
  }
  return out;
}

}  // namespace backplane::conformance
