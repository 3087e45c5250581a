#include "aoti/reference_file.h"

#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace backplane::cli {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

c10::IValue at_key(const c10::Dict<c10::IValue, c10::IValue>& dict, const std::string& key, const std::string& path,
                   const std::string& where) {
  if (!dict.contains(key)) fail(path, "missing key '" + key + "'" + where);
  return dict.at(key);
}

// A tolerance: a float, or an int taken as a number (torch.save keeps Python's type).
double number(const c10::IValue& v, const std::string& key, const std::string& path) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  fail(path, "'" + key + "' must be a number, found " + v.tagKind());
}

// Saved tensors may claim any device (a reference made on CUDA): they are compared on
// the CPU, so they are moved there explicitly, never left to the device they name.
std::vector<at::Tensor> tensors(const c10::IValue& list, const std::string& what, const std::string& path) {
  if (!list.isList()) fail(path, what + " must be a list of tensors, found " + list.tagKind());
  std::vector<at::Tensor> out;
  for (const auto& t : list.toListRef()) {
    if (!t.isTensor()) fail(path, what + " must hold tensors only, found " + t.tagKind());
    out.push_back(t.toTensor().cpu());
  }
  return out;
}

}  // namespace

Reference read_reference(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the reference file " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::IValue root = torch::pickle_load(bytes);
  if (!root.isGenericDict()) fail(path, "expected a dict saved by models/pipeline.py, found " + root.tagKind());
  const auto dict = root.toGenericDict();
  Reference ref;
  ref.atol = number(at_key(dict, "atol", path, ""), "atol", path);
  ref.rtol = number(at_key(dict, "rtol", path, ""), "rtol", path);
  const c10::IValue cases = at_key(dict, "cases", path, "");
  if (!cases.isList()) fail(path, "'cases' must be a list, found " + cases.tagKind());
  for (const auto& item : cases.toListRef()) {
    const std::string where = " in case " + std::to_string(ref.cases.size());
    if (!item.isGenericDict()) fail(path, "case " + std::to_string(ref.cases.size()) + " must be a dict, found " + item.tagKind());
    const auto c = item.toGenericDict();
    const c10::IValue batch = at_key(c, "batch", path, where);
    if (!batch.isInt()) fail(path, "'batch'" + where + " must be an int, found " + batch.tagKind());
    ref.cases.push_back({batch.toInt(), tensors(at_key(c, "inputs", path, where), "'inputs'" + where, path),
                         tensors(at_key(c, "expected", path, where), "'expected'" + where, path)});
  }
  if (ref.cases.empty()) fail(path, "holds no cases: nothing to run the package on or compare with");
  return ref;
}

}  // namespace backplane::cli
