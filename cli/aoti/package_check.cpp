#include "aoti/package_check.h"

#include <backplane/loader.h>
#include <backplane/registry.h>
#include <backplane/plugin/vendor_ops.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/StringUtil.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace backplane::cli {
namespace {

std::string record_text(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every "<prefix><identifier>" in text.
std::set<std::string> names_after(const std::string& text, const std::string& prefix) {
  std::set<std::string> out;
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    // "ns::" as a whole word: not the tail of another name ("_c10d_functional::" is not "functional::").
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
    size_t end = at + prefix.size();
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    if (end > at + prefix.size()) out.insert(text.substr(at + prefix.size(), end - at - prefix.size()));
  }
  return out;
}

// The plugins on the search path (loaded or not) that declare `op` for dispatch key `key`.
std::vector<std::string> providers(const std::string& op, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& r : backends())
    if (r.dispatch_key == key && std::find(r.ops.begin(), r.ops.end(), op) != r.ops.end())
      out.push_back(r.name + " (" + r.path + ", " + to_string(r.status) + ")");
  return out;
}

}  // namespace

std::vector<std::string> check_entries(const std::string& package) {
  // The reader strips the archive's top folder, and refuses an entry outside it.
  caffe2::serialize::PyTorchStreamReader reader(package);
  const auto names = reader.getAllRecords();
  std::map<std::string, int> count;
  for (const auto& name : names) ++count[name];
  for (const auto& name : names)
    if (count[name] > 1)
      throw std::runtime_error(c10::str(package, ": refusing the package: it holds ", count[name], " entries named '", name,
                                        "'"));
  for (const auto& name : names) {
    std::string part;
    bool escapes = !name.empty() && (name[0] == '/' || name[0] == '\\');
    for (size_t i = 0; i <= name.size() && !escapes; ++i) {
      if (i == name.size() || name[i] == '/' || name[i] == '\\') {
        escapes = part == "..";
        part.clear();
      } else {
        part += name[i];
      }
    }
    if (escapes)
      throw std::runtime_error(package + ": refusing the package: its entry '" + name +
                               "' would be written outside the extraction folder");
  }
  return names;
}

PackageNeeds package_needs(const std::string& package) {
  PackageNeeds needs;
  const auto metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(package, "model");
  const auto device = metadata.find("AOTI_DEVICE_KEY");
  if (device == metadata.end())
    throw std::runtime_error(package + ": no AOTI_DEVICE_KEY in the package metadata; not an AOTInductor package?");
  needs.device = device->second;
  // A plugin's device (npu) exists in the process once its plugin is loaded; c10's own
  // message would list torch's device types only.
  try {
    (void)c10::Device(needs.device);
  } catch (const c10::Error&) {
    throw std::runtime_error(package + ": the package runs on " + needs.device +
                             ", a device no loaded plugin provides; load the plugin for it (--backends " + needs.device +
                             ")");
  }

  caffe2::serialize::PyTorchStreamReader reader(package);
  std::set<std::string> ops, classes;
  const std::string ns = std::string(kNamespace);
  // The core's namespace and those of plugins' own ops (vendor_ops.h): the loaded ones,
  // and those whose fragments lie on the search path (so a package calling an op of a
  // plugin that is not loaded gets its name as the hint).
  std::set<std::string> namespaces, unloaded;
  for (const OpDef& op : all_ops()) namespaces.insert(op.ns);
  for (const auto& r : backends()) {
    if (r.registry.empty()) continue;
    try {
      const std::string space = read_fragment(r.registry).ns;
      if (namespaces.insert(space).second) unloaded.insert(space);
    } catch (const std::exception&) {
      // a bad fragment: its plugin is listed as rejected, with the reason
    }
  }
  for (const auto& name : reader.getAllRecords()) {
    if (!ends_with(name, ".json")) continue;
    const std::string text = record_text(reader, name);
    for (const auto& space : namespaces)
      for (const auto& op : names_after(text, space + "::")) {
        if (const OpDef* def = find_op_def(space + "::" + op)) ops.insert(def->id());
        else if (unloaded.count(space)) ops.insert(space + "::" + op);  // its plugin is not loaded
      }
    for (const auto& cls : names_after(text, "__torch__.torch.classes." + ns + "."))
      classes.insert("__torch__.torch.classes." + ns + "." + cls);
  }
  // A class method that calls an op needs that op's kernel as much as a direct call.
  for (const auto& qualified : classes) {
    const ClassDef* def = registry().find_class(qualified.substr(qualified.rfind('.') + 1));
    if (def == nullptr) continue;
    for (const auto& m : def->methods)
      if (m.kind == MethodDef::Kind::CallsOp) ops.insert(m.target);
  }
  needs.ops.assign(ops.begin(), ops.end());
  needs.classes.assign(classes.begin(), classes.end());
  return needs;
}

std::vector<std::string> missing_for(const PackageNeeds& needs) {
  std::vector<std::string> problems;
  const c10::Device device(needs.device);
  const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, c10::kStrided, device);
  const std::string key_name = c10::toString(key);
  for (const auto& op : needs.ops) {
    const OpDef* def = find_op_def(op);  // null: a plugin's own op, its plugin not loaded
    const std::string qualified = def ? def->qualified_name() : op;
    const auto handle = c10::Dispatcher::singleton().findOp({qualified, ""});
    if (handle && handle->hasKernelForDispatchKey(key)) continue;
    const auto found = providers(op, key_name);
    std::string hint = "no plugin on the search path implements it for " + key_name;
    if (!found.empty()) {
      hint = "load the plugin that implements it: ";
      for (size_t i = 0; i < found.size(); ++i) hint += (i ? " or " : "") + found[i];
    }
    problems.push_back("the package calls " + qualified + " on " + needs.device + ", but no loaded backend implements it for " +
                       key_name + "; " + hint);
  }
  for (const auto& cls : needs.classes)
    if (!torch::getCustomClass(cls))
      problems.push_back("the package holds a " + cls + " object, but no such class is registered in this process");
  return problems;
}

}  // namespace backplane::cli
