#include "registry/reserved_names.h"

#include <set>

namespace backplane::detail {
namespace {

bool python_keyword(const std::string& name) {
  static const std::set<std::string> keywords = {
      "False", "None",  "True",  "and",    "as",       "assert", "async", "await",  "break",
      "class", "continue", "def", "del",   "elif",     "else",   "except", "finally", "for",
      "from",  "global", "if",   "import", "in",       "is",     "lambda", "nonlocal", "not",
      "or",    "pass",  "raise", "return", "try",      "while",  "with",  "yield"};
  return keywords.count(name) > 0;
}

}  // namespace

// Why a fragment may not use namespace `ns` (empty: it may). The dispatcher knows the
// namespaces of PyTorch's C++ libraries only once they are loaded, and those its Python
// modules define only once imported (quantized_decomposed), so PyTorch's are listed here
// (tests/python/hardening/test_hardening_registry.py compares the list with this torch's);
// define/vendor_ops.cpp also asks the dispatcher, for every other library loaded.
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

}  // namespace backplane::detail
