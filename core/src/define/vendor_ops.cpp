// Plugins' own ops: the contract in vendor_ops.h. Also all_ops() and find_op_def(), which
// see the core registry and every fragment defined so far.
#include <backplane/plugin/vendor_ops.h>

#include "define/op_definition.h"
#include "util/posix_files.h"
#include "registry/yaml_location.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <yaml-cpp/yaml.h>

#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

namespace backplane {
namespace {

struct DefinedOp {
  OpDef def;
  std::string plugin;
};

// Append-only: a deque keeps references to its elements valid as it grows, and ops are
// never undefined (PyTorch may hold them in compiled graphs).
class VendorOps {
 public:
  static VendorOps& get() {
    static VendorOps* instance = new VendorOps();  // never destroyed: plugins outlive statics
    return *instance;
  }

  const DefinedOp* find(const std::string& qualified) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return find_locked(qualified);
  }

  std::vector<std::reference_wrapper<const OpDef>> snapshot() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::vector<std::reference_wrapper<const OpDef>> out;
    for (const auto& op : ops_) out.push_back(op.def);
    return out;
  }

  void define(const Fragment& fragment, const std::string& plugin) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (files_.count(fragment.file)) return;
    check_locked(fragment);
    auto& library = libraries_[fragment.ns];
    if (!library)
      library = std::make_unique<torch::Library>(torch::Library::FRAGMENT, fragment.ns, std::nullopt, __FILE__, __LINE__);
    for (const OpDef& op : fragment.ops) {
      ops_.push_back({op, plugin});  // first: defining it builds a Meta kernel that looks it up
      try {
        detail::define_op(*library, ops_.back().def);
      } catch (...) {
        ops_.pop_back();
        throw;
      }
    }
    files_.insert(fragment.file);
    owners_.emplace(fragment.ns, Owner{plugin, fragment.file});
  }

  void check(const Fragment& fragment) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!files_.count(fragment.file)) check_locked(fragment);
  }

 private:
  const DefinedOp* find_locked(const std::string& qualified) const {
    for (const auto& op : ops_)
      if (op.def.qualified_name() == qualified) return &op;
    return nullptr;
  }

  void check_locked(const Fragment& fragment) const {
    for (const OpDef& op : fragment.ops) {
      const std::string q = op.qualified_name();
      if (op.ns == kNamespace) {
        if (const OpDef* core = registry().find(op.name))
          throw RegistryError(op.where, "redefines " + q + ", which the core registry defines at " + core->where.str() +
                                            "; a plugin's ops go in a namespace of its own");
        throw RegistryError(op.where, "defines " + q + ", but the namespace '" + std::string(kNamespace) +
                                          "' belongs to the core registry; give the plugin's ops a namespace of its own");
      }
      if (const DefinedOp* other = find_locked(q))
        throw RegistryError(op.where, "redefines " + q + ", which plugin '" + other->plugin + "' already defined at " +
                                          other->def.where.str());
      // findSchema, not findOp: an op a library only implemented (m.impl) has no schema yet.
      if (c10::Dispatcher::singleton().findSchema(c10::OperatorName(q, "")))
        throw RegistryError(op.where, "defines " + q + ", which a library not loaded through backplane already "
                                          "defined in this process");
    }
    check_namespace_locked(fragment);
  }

  // A namespace belongs to the first fragment that defines ops in it: another plugin's
  // ops there would look like the owner's (torch.ops.acme.*) and could shadow its later
  // ones, and a namespace PyTorch or another library uses breaks inside torch.
  void check_namespace_locked(const Fragment& fragment) const {
    const SourceLocation where = fragment.ops.empty() ? SourceLocation{fragment.file, 0, 0} : fragment.ops.front().where;
    auto owner = owners_.find(fragment.ns);
    if (owner != owners_.end())
      throw RegistryError(where, "adds ops to namespace '" + fragment.ns + "', which belongs to plugin '" +
                                     owner->second.plugin + "' (its fragment " + owner->second.file +
                                     "); a fragment defines ops in a namespace of its own (a second plugin serving "
                                     "the same ops is built with USES_REGISTRY of the first's fragment)");
    const std::string prefix = fragment.ns + "::";
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames())
      if (name.name.compare(0, prefix.size(), prefix) == 0 && c10::Dispatcher::singleton().findSchema(name))
        throw RegistryError(where, "namespace '" + fragment.ns + "' already holds " + name.name +
                                       ", which PyTorch or another library defined in this process; give the "
                                       "plugin's ops a namespace of its own");
  }

  // Recursive: defining an op builds its Meta kernel, which looks the op up (find_op_def).
  std::recursive_mutex mutex_;
  std::deque<DefinedOp> ops_;
  std::set<std::string> files_;
  struct Owner {
    std::string plugin;
    std::string file;
  };
  std::map<std::string, Owner> owners_;  // namespace -> the fragment that defined it
  std::map<std::string, std::unique_ptr<torch::Library>> libraries_;  // per namespace
};

}  // namespace

Fragment parse_fragment(const std::string& text, const std::string& file) {
  Registry parsed = parse_registry(text, file);  // the grammar's own errors first
  const YAML::Node root = YAML::Load(text);
  Fragment fragment;
  fragment.file = file;
  const YAML::Node ns = root["namespace"];
  if (!ns)
    throw RegistryError(detail::at(file, root), "a plugin's registry fragment must name its namespace (top-level "
                                                "`namespace: acme`); its ops become torch.ops.<namespace>.<op>");
  if (root["classes"])
    throw RegistryError(detail::at(file, root["classes"]), "a plugin's registry fragment cannot declare classes yet; "
                                                           "only ops");
  fragment.ns = ns.Scalar();
  fragment.ops = parsed.ops();
  return fragment;
}

Fragment read_fragment(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = detail::read_regular_file(path, why);  // a FIFO would block
  if (!text) throw RegistryError({path, 0, 0}, "cannot read the registry fragment: " + why);
  return parse_fragment(*text, path);
}

void check_fragment(const Fragment& fragment) { VendorOps::get().check(fragment); }

void define_fragment(const Fragment& fragment, const std::string& plugin) { VendorOps::get().define(fragment, plugin); }

std::vector<std::reference_wrapper<const OpDef>> all_ops() {
  std::vector<std::reference_wrapper<const OpDef>> out(registry().ops().begin(), registry().ops().end());
  for (const auto& op : VendorOps::get().snapshot()) out.push_back(op);
  return out;
}

const OpDef* find_op_def(std::string_view name) {
  const std::string prefix = std::string(kNamespace) + "::";
  if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  if (name.find("::") == std::string_view::npos) return registry().find(name);
  const DefinedOp* op = VendorOps::get().find(std::string(name));
  return op ? &op->def : nullptr;
}

}  // namespace backplane
