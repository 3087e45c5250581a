// A small C interface over the loader and the registry, for the Python package
// (ctypes). C, so that no C++ type crosses into Python and no exception escapes:
// every call returns a status and a malloc'd UTF-8 string (JSON or an error
// message) that the caller frees with backplane_c_free. Status 0: JSON; 1: a backend
// error; 2: an internal error; 3: bad input from the caller (a preference, an op name).
#include <backplane/conformance.h>
#include "conformance/coverage.h"
#include <backplane/loader.h>
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>
#include <backplane/selection.h>
#include <backplane/selection_file.h>

#include "c_api/json_writer.h"

#include "util/strings.h"

#include "c_api/c_status.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <sstream>

namespace backplane {
namespace {


std::string records_json(const std::vector<BackendRecord>& records) {
  std::vector<std::string> items;
  for (const auto& r : records) items.push_back(json::backend_record(r));
  return json::array(items);
}

std::string ivalue_json(const c10::IValue& v) {
  if (v.isIntList()) {
    std::string out;
    for (auto i : v.toIntVector()) out += (out.empty() ? "" : ", ") + std::to_string(i);
    return "[" + out + "]";
  }
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    std::ostringstream out;
    out.precision(17);
    out << v.toDouble();
    return out.str();
  }
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isString()) return json::quote(v.toStringRef());
  return "null";
}

std::string inputs_json(const std::vector<OpInputs>& list) {
  std::vector<std::string> items;
  for (const auto& in : list) {
    json::Object args;
    for (const auto& [name, value] : in.args) args.raw(name, ivalue_json(value));
    json::Object item;
    item.str("name", in.name).raw("args", args.done());
    if (!in.layout.empty()) item.str("layout", in.layout);  // bench presets: every Tensor argument's layout
    if (in.magnitude != 1.0) item.raw("magnitude", ivalue_json(c10::IValue(in.magnitude)));  // samples: a factor
    items.push_back(item.done());
  }
  return json::array(items);
}

// The Tensor arguments with a `backward:` formula, in schema order.
std::vector<std::string> differentiable_args(const OpDef& def) {
  std::vector<std::string> names;
  for (const std::string& name : def.tensor_args)
    if (def.backward.count(name)) names.push_back(name);
  return names;
}

// The op's shape rules, one per output (one for an op that writes an argument):
// {"kind": "broadcast", "args": ["a", "b"]}, {"kind": "custom", "custom": "rms_norm", "args": []}
// (a custom rule's args: its layout source, `layout: x`, where it names one).
std::string shape_json(const OpDef& def) {
  static const char* kinds[] = {"same_as", "broadcast", "in_place", "out", "custom"};
  std::vector<std::string> rules;
  auto add = [&](const ShapeRule& rule) {
    json::Object item;
    item.str("kind", kinds[static_cast<int>(rule.kind)]).raw("args", json::list(rule.args));
    if (!rule.custom.empty()) item.str("custom", rule.custom);
    rules.push_back(item.done());
  };
  add(def.shape);
  for (const ShapeRule& rule : def.extra_outputs) add(rule);
  return json::array(rules);
}

// `sharding:` as written: {"kind": "derived" | "pointwise" | "mixes" | "replicate" | "none",
// "mixes": N, "summed": [output index, ...]}.
std::string sharding_json(const ShardingRule& rule) {
  static const char* kinds[] = {"derived", "pointwise", "mixes", "replicate", "none"};
  std::vector<std::string> summed;
  for (int index : rule.summed) summed.push_back(std::to_string(index));
  return json::Object()
      .str("kind", kinds[static_cast<int>(rule.kind)])
      .raw("mixes", std::to_string(rule.mixes))
      .raw("summed", json::array(summed))
      .str("where", rule.where.line ? rule.where.str() : "")
      .done();
}

std::string ops_json() {
  std::vector<std::string> rows;
  for (const auto& row : coverage(backends())) {
    const OpDef& def = *find_op_def(row.op);
    std::vector<std::string> dtypes, cells;
    for (auto dtype : def.dtypes) dtypes.push_back(dtype_name(dtype));
    for (const auto& cell : row.backends)
      cells.push_back(json::Object()
                          .str("backend", cell.backend)
                          .str("status", to_string(cell.status))
                          .raw("implemented", cell.implemented ? "true" : "false")
                          .raw("dtypes", json::list(cell.dtypes))
                          .done());
    json::Object backward;  // argument -> its formula (a key naming several: each of them)
    for (const auto& [arg, gradient] : def.backward) backward.str(arg, gradient.formula);
    rows.push_back(json::Object()
                       .str("name", row.op)
                       .str("namespace", def.ns)
                       .str("schema", def.schema)
                       .str("doc", row.doc)
                       .raw("dtypes", json::list(dtypes))
                       .raw("backends", json::array(cells))
                       .raw("arguments", json::list(def.arg_names))
                       .raw("tensor_args", json::list(def.tensor_args))
                       .raw("differentiable", json::list(differentiable_args(def)))
                       .str("reference", def.checks.reference)
                       .str("baseline", def.checks.baseline)
                       // `flops:` per element of the largest Tensor argument; null: not given
                       .raw("flops", def.checks.flops_per_element > 0
                                         ? ivalue_json(c10::IValue(def.checks.flops_per_element))
                                         : "null")
                       .raw("backward", backward.done())
                       .raw("shape", shape_json(def))
                       .raw("sharding", sharding_json(def.sharding))
                       .raw("samples", inputs_json(def.checks.samples))
                       .raw("bench", inputs_json(def.checks.bench))
                       .done());
  }
  return json::array(rows);
}

// The registry's custom classes, for the Python package's generated fake classes.
std::string classes_json() {
  std::vector<std::string> items;
  for (const ClassDef& cls : registry().classes()) {
    std::vector<std::string> state, methods;
    for (const auto& f : cls.state) state.push_back(json::Object().str("name", f.name).str("type", f.type).done());
    for (const auto& m : cls.methods)
      methods.push_back(json::Object()
                            .str("name", m.name)
                            .str("schema", m.schema)
                            .str("doc", m.doc)
                            .str("kind", m.kind == MethodDef::Kind::CallsOp ? "calls" : "returns")
                            .str("target", m.target)
                            .done());
    items.push_back(json::Object()
                        .str("name", cls.name)
                        .str("doc", cls.doc)
                        .str("init", cls.init)
                        .raw("state", json::array(state))
                        .raw("methods", json::array(methods))
                        .done());
  }
  return json::array(items);
}

// Collects c10 warnings for the scope instead of printing them.
struct CollectWarnings : c10::WarningHandler {
  std::vector<std::string> messages;
  c10::WarningUtils::WarningHandlerGuard guard{this};
  void process(const c10::Warning& warning) override { messages.push_back(warning.msg()); }
};

// A comma list as written: "a,,b" keeps its empty entry for the checks to name; "" is none.
std::vector<std::string> comma_list(const std::string& text) {
  return text.empty() ? std::vector<std::string>{} : detail::split(text, ',');
}

std::string known_ops() {
  std::string out;
  for (const OpDef& op : all_ops()) out += (out.empty() ? "" : ", ") + op.id();
  return out;
}

// check's op list as ids; throws std::invalid_argument naming an unknown op and the known.
std::vector<std::string> ops_to_check(const std::string& text) {
  std::vector<std::string> ids;
  for (const auto& op : comma_list(text)) {
    if (op.empty()) continue;
    const OpDef* def = find_op_def(op);
    if (def == nullptr)
      throw std::invalid_argument("check: no op '" + op + "' in the registry or a loaded plugin's fragment; known: " +
                                  known_ops());
    ids.push_back(def->id());
  }
  return ids;
}

}  // namespace
}  // namespace backplane

extern "C" {

// Loads one backend; dir may be NULL. 0: *out is the record as JSON; 1: *out is the
// reason it failed; 2: *out is an internal error.
// The record carries "warnings": what the load warned about (a plugin conflict, say),
// for Python to raise as warnings rather than leave on the C++ stderr.
__attribute__((visibility("default"))) int backplane_c_load(const char* name, const char* dir, char** out) {
  return backplane::guarded(out, [&] {
    backplane::LoadOptions options;
    if (dir != nullptr) options.dir = dir;
    backplane::CollectWarnings collect;
    const std::string record = backplane::json::backend_record(backplane::load(std::string(name), options));
    return record.substr(0, record.size() - 1) + ", \"warnings\": " + backplane::json::list(collect.messages) + "}";
  });
}

__attribute__((visibility("default"))) int backplane_c_backends(char** out) {
  return backplane::guarded(out, [] { return backplane::records_json(backplane::backends()); });
}

__attribute__((visibility("default"))) int backplane_c_ops(char** out) {
  return backplane::guarded(out, [] { return backplane::ops_json(); });
}

__attribute__((visibility("default"))) int backplane_c_classes(char** out) {
  return backplane::guarded(out, [] { return backplane::classes_json(); });
}

__attribute__((visibility("default"))) int backplane_c_info(char** out) {
  return backplane::guarded(out, [] {
    return backplane::json::Object()
        .str("version", backplane::core_version())
        .str("torch", backplane::torch_major_minor())
        .raw("plugin_abi", std::to_string(backplane::kPluginAbi))
        .raw("search_path", backplane::json::list(backplane::plugin_search_path()))
        .done();
  });
}

// Per-op plugin selection (selection.h): replaces every preference with spec
// ("op:a,b;op2:c"; "" clears them). *out is the new preferences string; 3: a bad spec.
__attribute__((visibility("default"))) int backplane_c_set_preferences(const char* spec, char** out) {
  return backplane::guarded_input(out, [&] {
    backplane::set_preferences(spec);
    return backplane::json::quote(backplane::preferences_string());
  });
}

// Sets op's preference to plugins (a comma list; "" clears it) until released: *out is
// the hold's token (hold_preference in selection.h). 3: a bad op or plugin name.
__attribute__((visibility("default"))) int backplane_c_hold_preference(const char* op, const char* plugins, char** out) {
  return backplane::guarded_input(out, [&] {
    return std::to_string(backplane::hold_preference(op, backplane::comma_list(plugins)));
  });
}

// Ends a hold: withdraw != 0 takes its preference back, 0 keeps it for good. *out is the
// preferences string now.
__attribute__((visibility("default"))) int backplane_c_release_preference(std::uint64_t token, int withdraw,
                                                                        char** out) {
  return backplane::guarded(out, [&] {
    backplane::release_preference(token, withdraw != 0);
    return backplane::json::quote(backplane::preferences_string());
  });
}

__attribute__((visibility("default"))) int backplane_c_serving(char** out) {
  return backplane::guarded(out, [] {
    std::vector<std::string> rows;
    for (const auto& s : backplane::serving()) rows.push_back(backplane::json::serving_record(s));
    std::vector<std::string> rules;  // the file's, as read: the compile-time pass resolves them
    for (const auto& r : backplane::selection_rules()) rules.push_back(backplane::json::selection_rule(r));
    return backplane::json::Object()
        .raw("serving", backplane::json::array(rows))
        .str("preferences", backplane::preferences_string())
        .str("selection_file", backplane::selection_file())
        .raw("rules", backplane::json::array(rules))
        .done();
  });
}

// Applies a selection file (selection_file.h; strict != 0: refuse one naming a plugin
// that is not loaded, or measured elsewhere); "" clears it. torch_here: torch.__version__;
// devices: the devices here to compare the file's environment with, a line each,
// "type\tname\tcapability\tdriver" ("" describes none). *out is {"selection_file": the
// path in force, "warnings": [what applying it warned about]}, for Python to raise as
// warnings; 3: a file that cannot be read, is not a selection file, or is refused.
__attribute__((visibility("default"))) int backplane_c_apply_selection(const char* path, int strict,
                                                                       const char* torch_here, const char* devices,
                                                                       char** out) {
  return backplane::guarded_input(out, [&] {
    backplane::CollectWarnings collect;
    std::vector<backplane::SelectionDevice> here;
    if (torch_here == nullptr) torch_here = "";  // NULL describes nothing, as ""
    for (const std::string& line : backplane::detail::split(devices ? devices : "", '\n')) {
      const std::vector<std::string> fields = backplane::detail::split(line, '\t');
      if (fields.size() == 4) here.push_back({fields[0], fields[1], fields[2], fields[3]});
    }
    if (*path == '\0')
      backplane::clear_selection_file();
    else
      backplane::apply_selection_file(path, strict != 0, torch_here, here);
    return backplane::json::Object()
        .str("selection_file", backplane::selection_file())
        .raw("warnings", backplane::json::list(collect.messages))
        .done();
  });
}

// The conformance suite on a loaded backend; ops is a comma list or "" for all; gradients
// 0 leaves out the gradient cases. 1: the backend is not loaded or has no device here; 3:
// an op that no loaded registry defines.
__attribute__((visibility("default"))) int backplane_c_check(const char* backend, const char* ops, int gradients,
                                                             char** out) {
  return backplane::guarded_input(out, [&] {
    const backplane::BackendRecord record = backplane::load(std::string(backend));
    const std::vector<std::string> only = backplane::ops_to_check(ops);  // after loading: its own ops are known
    std::string why;
    const auto device = backplane::conformance::device_for_key(record.dispatch_key, &why);
    if (!device) throw backplane::BackendError("backend '" + record.name + "' cannot be checked here: " + why);
    std::vector<std::string> rows;
    for (const auto& r : backplane::conformance::check_backend(record, *device, only, gradients != 0))
      rows.push_back(backplane::json::Object()
                         .str("backend", r.backend)
                         .str("op", r.op)
                         .str("case", r.case_name)
                         .str("dtype", r.dtype)
                         .str("outcome", backplane::conformance::to_string(r.outcome))
                         .str("detail", r.detail)
                         .done());
    return backplane::json::array(rows);
  });
}

// BACKPLANE_BACKENDS's value as backend names (backend_names_from_environment in
// loader.h): *out is a JSON list, ["none"] for "none"; 3: a value the rule refuses, with
// the message the `backplane` command gives.
__attribute__((visibility("default"))) int backplane_c_environment_backends(const char* value, char** out) {
  return backplane::guarded_input(out, [&] {
    return backplane::json::list(backplane::backend_names_from_environment(value));
  });
}

// A --backends value as backend names (backend_names in loader.h), its messages naming
// `what` ("--backends"); as backplane_c_environment_backends otherwise.
__attribute__((visibility("default"))) int backplane_c_backend_names(const char* value, const char* what, char** out) {
  return backplane::guarded_input(out, [&] { return backplane::json::list(backplane::backend_names(value, what)); });
}

__attribute__((visibility("default"))) void backplane_c_free(char* text) { std::free(text); }

}  // extern "C"
