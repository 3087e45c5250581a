// `backplane ops`: the coverage table, each registry op on each backend, and which plugin
// serves each op where two serve one device.
#include "cli.h"

#include <backplane/conformance.h>
#include "c_api/json_writer.h"
#include <backplane/registry.h>
#include <backplane/selection.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>

namespace backplane::cli {
namespace {

// What `ops` shows in a cell: the dtypes a loaded backend was measured to accept, or what
// an unloaded one's manifest declares.
struct Cell {
  bool implemented = false;
  bool measured = false;
  std::vector<std::string> dtypes;
};

Cell cell_for(const BackendRecord& r, const OpDef& op) {
  Cell cell;
  cell.implemented = std::count(r.ops.begin(), r.ops.end(), op.id()) > 0;
  if (!cell.implemented) return cell;
  std::optional<c10::Device> device;
  if (r.status == BackendStatus::Loaded) device = conformance::device_for_key(r.dispatch_key, nullptr);
  if (device) {
    cell.measured = true;
    for (auto d : conformance::measured_dtypes(r, op, *device)) cell.dtypes.push_back(dtype_name(d));
  } else {
    for (auto d : op.dtypes) cell.dtypes.push_back(dtype_name(d));
  }
  return cell;
}

}  // namespace

int ops_command(const Options& options) {
  const auto records = load_selected(options);
  const auto served = serving();
  std::vector<std::string> json_rows;
  const auto ops = all_ops();  // after loading: plugins' own ops too
  const int width = op_column_width(ops);
  const int name_width = backend_column_width(records);  // each backend's column holds its name
  if (!options.json) {
    std::cout << std::left << std::setw(width) << "OP";
    for (const auto& r : records) std::cout << std::setw(name_width) << r.name;
    std::cout << "DTYPES (registry)\n";
  }
  for (const OpDef& op : ops) {
    std::vector<std::string> declared;
    for (auto d : op.dtypes) declared.push_back(dtype_name(d));
    std::vector<std::string> cells_json;
    if (!options.json) std::cout << std::left << std::setw(width) << op.id();
    for (const auto& r : records) {
      const Cell cell = cell_for(r, op);
      if (options.json) {
        cells_json.push_back(json::Object()
                                 .str("backend", r.name)
                                 .raw("implemented", cell.implemented ? "true" : "false")
                                 .raw("measured", cell.measured ? "true" : "false")
                                 .raw("dtypes", json::list(cell.dtypes))
                                 .done());
        continue;
      }
      std::string text = !cell.implemented                     ? "-"
                         : !cell.measured                        ? "yes*"
                         : cell.dtypes.size() == declared.size() ? "yes"
                         : cell.dtypes.empty()                   ? "FAILS"
                                                                 : "partial";
      std::cout << std::setw(name_width) << text;
    }
    if (options.json) {
      json_rows.push_back(json::Object()
                              .str("op", op.id())
                              .str("schema", op.schema)
                              .str("doc", op.doc)
                              .raw("dtypes", json::list(declared))
                              .raw("backends", json::array(cells_json))
                              .done());
      continue;
    }
    std::cout << join(declared, ",") << "\n";
  }
  std::vector<std::string> serving_json;
  bool any_conflict = false;
  for (const auto& s : served) {
    serving_json.push_back(json::serving_record(s));
    if (s.offered_by.size() < 2 || options.json) continue;
    if (!any_conflict) std::cout << "\nserved by (where plugins share a device):\n";
    any_conflict = true;
    std::cout << "  " << std::setw(16) << s.op << std::setw(13) << s.dispatch_key << s.serving << " (" << s.why
              << "); offered by " << join(s.offered_by, ", ") << "\n";
  }
  if (options.json) {
    std::cout << json::Object()
                     .raw("ops", json::array(json_rows))
                     .raw("serving", json::array(serving_json))
                     .str("preferences", preferences_string())
                     .done()
              << "\n";
    return kExitOk;
  }
  std::cout << "\n-: not implemented on that backend. yes: every registry dtype ran and matched the op's "
               "reference.\npartial / FAILS: some / no dtype did (`backplane ops --json` lists them, `backplane check` "
               "says why).\nyes*: as its manifest declares, not measured here (not loaded, or no device).\n";
  return kExitOk;
}

}  // namespace backplane::cli
