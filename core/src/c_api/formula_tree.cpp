// The formula grammar for Python: the core's parser (formula/formula_parse.cpp) is the
// grammar's one implementation, and backplane/formula.py evaluates the tree it gives here.
#include "c_api/c_status.h"
#include "formula/formula_node.h"

#include "c_api/json_writer.h"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace backplane::conformance {
namespace {

using Node = ReferenceExpr::Node;

// A float keeps a '.' or an exponent, so that Python reads 1.0 back as a float, not an
// int; infinity (a literal such as 1e999) as Python's json writes it.
std::string float_json(double value) {
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  std::string text(buffer, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string literal_json(const c10::IValue& v) {
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return float_json(v.toDouble());
  if (v.isString()) return json::quote(v.toStringRef());
  return "null";  // None
}

// Recursive like the parser, which bounds the depth at 100.
std::string node_json(const Node& node) {
  static const char* kinds[] = {"call", "name", "index", "literal", "list", "dtype"};
  json::Object out;
  out.str("kind", kinds[static_cast<int>(node.kind)]);
  switch (node.kind) {
    case Node::Kind::Call: {
      std::vector<std::string> args;
      for (const auto& arg : node.args)
        args.push_back(json::Object().str("keyword", arg.keyword).raw("value", node_json(*arg.value)).done());
      out.str("name", node.name).str("overload", node.overload).raw("args", json::array(args));
      break;
    }
    case Node::Kind::List: {
      std::vector<std::string> items;
      for (const auto& arg : node.args) items.push_back(node_json(*arg.value));
      out.raw("items", json::array(items));
      break;
    }
    case Node::Kind::Index:
      out.str("name", node.name).raw("index", std::to_string(node.index));
      break;
    case Node::Kind::Name:
    case Node::Kind::Dtype:
      out.str("name", node.name);
      break;
    case Node::Kind::Literal:
      out.raw("value", literal_json(node.literal));
      break;
  }
  return out.done();
}

}  // namespace
}  // namespace backplane::conformance

extern "C" {

// Parses the formula text[0, length) (a length, so that a NUL in it is the parser's to
// refuse). 0: *out is the tree as JSON: {"kind": "call", "name": "aten::add", "overload":
// "Tensor", "args": [{"keyword": "" or a name, "value": node}]}, {"kind": "list", "items":
// [node]}, {"kind": "name" | "dtype", "name": arg}, {"kind": "index", "name": arg, "index":
// int}, {"kind": "literal", "value": JSON value}. 3: *out is the parser's FormulaError,
// "formula 'TEXT', column N: message". 2: an internal error.
__attribute__((visibility("default"))) int backplane_c_formula_tree(const char* text, size_t length, char** out) {
  return backplane::guarded_input(out, [&] {  // a FormulaError is an invalid_argument: 3
    using backplane::conformance::ReferenceExpr;
    return backplane::conformance::node_json(ReferenceExpr::parse(std::string(text, length)).root());
  });
}

}  // extern "C"
