// A small C interface over the loader and the registry, for the Python package
// (ctypes). C, so that no C++ type crosses into Python and no exception escapes:
// every call returns a status and a malloc'd UTF-8 string (JSON or an error
// message) that the caller frees with backplane_c_free.
#include <backplane/coverage.h>
#include <backplane/loader.h>
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>

#include "json_writer.h"

#include <cstdlib>
#include <cstring>

namespace backplane {
namespace {

char* give(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

std::string record_json(const BackendRecord& r) {
  return json::Object()
      .str("name", r.name)
      .str("status", to_string(r.status))
      .str("reason", r.reason)
      .str("path", r.path)
      .str("version", r.version)
      .str("dispatch_key", r.dispatch_key)
      .raw("ops", json::list(r.ops))
      .done();
}

std::string records_json(const std::vector<BackendRecord>& records) {
  std::vector<std::string> items;
  for (const auto& r : records) items.push_back(record_json(r));
  return json::array(items);
}

std::string ops_json() {
  std::vector<std::string> rows;
  for (const auto& row : coverage(backends())) {
    const OpDef& def = *registry().find(row.op);
    std::vector<std::string> dtypes, cells;
    for (auto dtype : def.dtypes) dtypes.push_back(dtype_name(dtype));
    for (const auto& cell : row.backends)
      cells.push_back(json::Object()
                          .str("backend", cell.backend)
                          .str("status", to_string(cell.status))
                          .raw("implemented", cell.implemented ? "true" : "false")
                          .raw("dtypes", json::list(cell.dtypes))
                          .done());
    rows.push_back(json::Object()
                       .str("name", row.op)
                       .str("schema", def.schema)
                       .str("doc", row.doc)
                       .raw("dtypes", json::list(dtypes))
                       .raw("backends", json::array(cells))
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

template <typename Fn>
int guarded(char** out, Fn&& fn) {
  try {
    *out = give(fn());
    return 0;
  } catch (const BackendError& e) {
    *out = give(e.what());
    return 1;
  } catch (const std::exception& e) {
    *out = give(std::string("internal error: ") + e.what());
    return 2;
  }
}

}  // namespace
}  // namespace backplane

extern "C" {

// Loads one backend; dir may be NULL. 0: *out is the record as JSON; 1: *out is the
// reason it failed; 2: *out is an internal error.
__attribute__((visibility("default"))) int backplane_c_load(const char* name, const char* dir, char** out) {
  return backplane::guarded(out, [&] {
    backplane::LoadOptions options;
    if (dir != nullptr) options.dir = dir;
    return backplane::record_json(backplane::load(std::string(name), options));
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

__attribute__((visibility("default"))) void backplane_c_free(char* text) { std::free(text); }

}  // extern "C"
