// `backplane check`: the conformance suite on each loaded backend, one line per op.
#include "cli.h"

#include <backplane/conformance.h>
#include "c_api/json_writer.h"
#include <backplane/registry.h>

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <utility>

namespace backplane::cli {

namespace {

using Unchecked = std::vector<std::pair<std::string, std::string>>;  // backend, why

// "cuda (no cuda device is present), ...", for the last line.
std::string listed(const Unchecked& unchecked) {
  std::string out;
  for (const auto& [name, why] : unchecked) out += (out.empty() ? "" : ", ") + name + " (" + why + ")";
  return out;
}

// The last line and the exit code. A backend without its device passes nothing: it fails
// the run where it was named, or where nothing else was checked, unless allowed.
std::pair<std::string, int> verdict(int failures, int checked, const Unchecked& no_device, const Unchecked& not_loaded,
                                    bool named, bool allow_missing_device) {
  Unchecked unchecked = no_device;
  unchecked.insert(unchecked.end(), not_loaded.begin(), not_loaded.end());
  const bool missing_fails = !allow_missing_device && !no_device.empty() && (named || checked == 0);
  const bool nothing_fails = checked == 0 && !(allow_missing_device && not_loaded.empty() && !no_device.empty());
  std::string summary = failures > 0   ? "some checks FAILED"
                        : checked == 0 ? "nothing was checked: " + (unchecked.empty() ? "no backend selected" : listed(unchecked))
                                       : "every implemented op passed against PyTorch";
  if (checked > 0 && !unchecked.empty()) summary += "; not checked: " + listed(unchecked);
  if (missing_fails) summary += " (--allow-missing-device to pass without a device)";
  return {summary, failures > 0 || missing_fails || nothing_fails ? kExitFailed : kExitOk};
}

// The named backends (arguments, --backends, BACKPLANE_BACKENDS) when one of them is a
// plugin of kind triton: its kernels are Python launchers, which this process (no Python)
// cannot load, so the Python side checks them all (python/backplane/check_command.py).
std::vector<std::string> named_with_python_kernels(const Options& options) {
  std::vector<std::string> names;
  if (options.backends)
    names = *options.backends;
  else if (const char* env = std::getenv("BACKPLANE_BACKENDS"))
    names = backend_names_from_environment(env);
  for (const auto& record : backends(options.load))
    if (record.kind != "shared_library" && std::count(names.begin(), names.end(), record.name)) return names;
  return {};
}

}  // namespace

int check_command(const Options& options) {
  if (const auto names = named_with_python_kernels(options); !names.empty()) {
    pass_common_flags_on(options);
    std::vector<std::string> args = {"check", "--backends", join(names, ",")};
    if (!options.ops.empty()) args.insert(args.end(), {"--ops", join(options.ops, ",")});
    if (options.verbose) args.push_back("-v");
    for (const auto& flag : options.rest)
      if (flag == "--no-gradients" || flag == "--allow-missing-device") args.push_back(flag);
    if (options.json) {
      std::cerr << "backplane check: --json is not given for a plugin of kind triton (checked by the Python side, "
                   "which prints the table)\n";
      return kExitUsage;
    }
    return exec_python_side("check", args, "checking a plugin of kind triton, whose kernels are Python launchers");
  }
  using conformance::Outcome;
  int failures = 0;
  int checked = 0;
  Unchecked no_device, not_loaded;
  // Named backends must be checked: as arguments, --backends or BACKPLANE_BACKENDS.
  const bool named = options.backends || std::getenv("BACKPLANE_BACKENDS");
  const bool allow_missing_device =
      std::count(options.rest.begin(), options.rest.end(), "--allow-missing-device") > 0;
  const bool gradients = std::count(options.rest.begin(), options.rest.end(), "--no-gradients") == 0;
  std::vector<std::string> json_rows;
  const auto records = load_selected(options);  // loading may define plugins' own ops
  std::vector<std::string> only;  // as ids: "backplane::add" is "add"
  for (const auto& op : options.ops) {
    const OpDef* def = find_op_def(op);
    if (!def) {
      std::cerr << "backplane check: --ops: no op '" << op << "' in the registry or a loaded plugin's fragment\n";
      return 2;
    }
    only.push_back(def->id());
  }
  const auto ops = all_ops();
  const int width = op_column_width(ops);
  const int name_width = backend_column_width(records);
  if (!options.json)
    std::cout << std::left << std::setw(name_width) << "BACKEND" << std::setw(width) << "OP" << std::setw(8) << "PASSED"
              << std::setw(8) << "FAILED" << "SKIPPED\n";
  for (const auto& record : records) {
    std::string why;
    std::optional<c10::Device> device;
    if (record.status != BackendStatus::Loaded)
      why = std::string(to_string(record.status)) + ": " + record.reason;
    else
      device = conformance::device_for_key(record.dispatch_key, &why);
    if (!device) {
      (record.status == BackendStatus::Loaded ? no_device : not_loaded).push_back({record.name, why});
      if (options.json)
        json_rows.push_back(json::Object().str("backend", record.name).str("status", "not checked").str("reason", why).done());
      else
        std::cout << std::setw(name_width) << record.name << "not checked: " << why << "\n";
      continue;
    }
    ++checked;
    const auto results = conformance::check_backend(record, *device, only, gradients);
    for (const OpDef& op : ops) {
      int passed = 0, failed = 0, skipped = 0;
      bool missing = false, ran = false;
      std::vector<const conformance::Result*> bad;
      for (const auto& r : results) {
        if (r.op != op.id()) continue;
        ran = true;
        if (r.outcome == Outcome::NotImplemented) missing = true;
        else if (r.outcome == Outcome::Skipped) ++skipped;
        else if (r.outcome == Outcome::Passed) ++passed;
        else { ++failed; bad.push_back(&r); }
      }
      if (!ran) continue;
      failures += failed;
      if (options.json) {
        json::Object row;
        row.str("backend", record.name).str("op", op.id());
        if (missing) {
          row.str("status", "not implemented");
        } else {
          row.str("status", failed ? "failed" : "passed")
              .raw("passed", std::to_string(passed))
              .raw("failed", std::to_string(failed))
              .raw("skipped", std::to_string(skipped));
          std::vector<std::string> failures_json;
          for (const auto* r : bad)
            failures_json.push_back(
                json::Object().str("case", r->case_name).str("dtype", r->dtype).str("detail", r->detail).done());
          row.raw("failures", json::array(failures_json));
        }
        json_rows.push_back(row.done());
        continue;
      }
      std::cout << std::setw(name_width) << record.name << std::setw(width) << op.id();
      if (missing) {
        std::cout << "not implemented on " << record.name << "\n";
        continue;
      }
      std::cout << std::setw(8) << passed << std::setw(8) << failed << skipped << "\n";
      const size_t shown = options.verbose ? bad.size() : std::min<size_t>(bad.size(), 3);
      for (size_t i = 0; i < shown; ++i) {
        std::string detail = bad[i]->detail;
        // A dispatcher error carries a dump of every kernel; one line unless -v.
        if (!options.verbose && detail.find('\n') != std::string::npos) detail = detail.substr(0, detail.find('\n')) + " (-v for more)";
        std::cout << "    FAILED " << bad[i]->case_name << " [" << bad[i]->dtype << "]: " << detail << "\n";
      }
      if (shown < bad.size()) std::cout << "    ... and " << bad.size() - shown << " more (-v lists all)\n";
    }
  }
  const auto [summary, status] = verdict(failures, checked, no_device, not_loaded, named, allow_missing_device);
  if (options.json) {
    std::cout << json::array(json_rows) << "\n";
    if (status != kExitOk && failures == 0) std::cerr << "backplane check: " << summary << "\n";
  } else {
    std::cout << summary << "\n";
  }
  return status;
}

}  // namespace backplane::cli
