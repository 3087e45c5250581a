#include "commands/scaffold_kernel_file.h"

#include <ATen/core/function_schema.h>

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

// The C++ parameter type a kernel takes for a schema argument; where the scaffold cannot
// say, `auto` behind a comment naming the schema type, for the vendor to fill in.
std::string cpp_type(const c10::Argument& arg) {
  const c10::TypePtr& type = arg.type();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return arg.alias_info() && arg.alias_info()->isWrite() ? "at::Tensor&" : "const at::Tensor&";
    case c10::TypeKind::NumberType: return "const at::Scalar&";
    case c10::TypeKind::FloatType: return "double";
    case c10::TypeKind::IntType: return "int64_t";
    case c10::TypeKind::SymIntType: return "int64_t";
    case c10::TypeKind::BoolType: return "bool";
    case c10::TypeKind::StringType: return "c10::string_view";
    case c10::TypeKind::ListType: {
      const auto element = type->containedType(0)->kind();
      if (element == c10::TypeKind::IntType || element == c10::TypeKind::SymIntType) return "at::IntArrayRef";
      if (element == c10::TypeKind::FloatType) return "at::ArrayRef<double>";
      if (element == c10::TypeKind::TensorType) return "at::TensorList";
      break;
    }
    case c10::TypeKind::OptionalType:
      if (type->containedType(0)->kind() == c10::TypeKind::TensorType) return "const std::optional<at::Tensor>&";
      break;
    default: break;
  }
  return "/* " + type->str() + ": fill in the C++ type */ auto";
}

// The same for a stable-ABI kernel (stable_kernel.h: Tensor, float, int, bool, Scalar and
// int[]); empty for an argument the stable path cannot carry.
std::string stable_cpp_type(const c10::Argument& arg) {
  switch (arg.type()->kind()) {
    case c10::TypeKind::TensorType:
      return arg.alias_info() && arg.alias_info()->isWrite() ? "torch::stable::Tensor&" : "const torch::stable::Tensor&";
    case c10::TypeKind::FloatType: return "double";
    case c10::TypeKind::IntType: return "int64_t";
    case c10::TypeKind::BoolType: return "bool";
    case c10::TypeKind::NumberType: return "const backplane::stable::Scalar&";
    case c10::TypeKind::ListType:
      return arg.type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::IntType
                 ? "backplane::stable::IntList"
                 : "";
    default: return "";
  }
}

}  // namespace

KernelFile kernel_file(const fs::path& templates, const OpDef& op, Values values, bool stable) {
  const bool writes = op.writes();
  const std::string& key = values["KEY"];
  const std::string tensor = stable ? "torch::stable::Tensor&" : "at::Tensor&";
  values["OP"] = op.name;
  values["SCHEMA"] = op.schema;
  values["DOC"] = op.doc;
  const std::string rel = "kernels/" + op.name + ".cpp";
  if (stable) {
    for (const c10::Argument& arg : op.arguments)
      if (stable_cpp_type(arg).empty()) {
        values["ARGUMENT"] = arg.name();
        values["ARGUMENT_TYPE"] = arg.type()->str();
        return {rel, from_template(templates, "stable/kernel-uncarried.cpp.in", values)};
      }
    if (op.name == "mul") {
      const std::string ext = key == "CUDA" ? "cu" : "cpp";
      return {"kernels/mul." + ext, from_template(templates, "stable/" + key + "/mul." + ext + ".in", values)};
    }
  }
  // One output: `out`; several (rms_norm_backward's dx and dweight): out0, out1, ...
  std::string params;
  for (size_t k = 0; k < op.new_outputs(); ++k)
    params += (params.empty() ? "" : ", ") + tensor + " out" + (op.new_outputs() == 1 ? "" : std::to_string(k));
  for (const c10::Argument& arg : op.arguments)
    params += (params.empty() ? "" : ", ") + (stable ? stable_cpp_type(arg) : cpp_type(arg)) + " " + arg.name();
  values["PARAMS"] = params;
  values["OUTPUTS"] = writes                    ? ""
                      : op.new_outputs() == 1 ? ", allocated `out` with\n// the result's sizes"
                                              : ", allocated the outputs with\n// their sizes";
  values["LAYOUT_NOTE"] =
      op.shape.kind == ShapeRuleKind::Broadcast ? from_template(templates, "kernel-broadcast.cpp.in", values) : "";
  if (stable) {
    values["MUL_EXT"] = key == "CUDA" ? "cu" : "cpp";
    values["REGISTER"] = writes ? "BACKPLANE_STABLE_WRITING_KERNEL" : "BACKPLANE_STABLE_KERNEL";
    return {rel, from_template(templates, "stable/kernel.cpp.in", values)};
  }
  values["DEVICE_NOTE"] = key == "PrivateUse1" ? from_template(templates, "PrivateUse1/kernel-device.cpp.in", values) : "";
  values["NAMESPACE"] = (key == "PrivateUse1" ? "backplane::" : "") + values["NAME"];
  values["REGISTER"] = writes ? "BACKPLANE_WRITING_KERNEL" : "BACKPLANE_KERNEL";
  return {rel, from_template(templates, "kernel.cpp.in", values)};
}

}  // namespace backplane::cli
