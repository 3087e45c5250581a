// Running the suite on a backend: which device it computes on, which ops it lacks,
// and calling its own kernels even where another plugin serves the same device.
#include <backplane/conformance.h>
#include <backplane/selection.h>

#include "conformance/cases.h"
#include "conformance/gradient_cases.h"
#include "conformance/inputs.h"

#include <c10/core/DispatchKey.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace backplane::conformance {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::Passed: return "passed";
    case Outcome::Failed: return "failed";
    case Outcome::Skipped: return "skipped";
    case Outcome::NotImplemented: return "not implemented";
  }
  return "unknown";
}

std::vector<std::reference_wrapper<const OpSuite>> suites() {
  // Ops only ever get added (a plugin's fragment, when it loads): derive the new ones.
  static std::mutex mutex;
  static std::map<std::string, OpSuite>* derived = new std::map<std::string, OpSuite>();  // stable references
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::reference_wrapper<const OpSuite>> out;
  for (const OpDef& op : all_ops()) {
    auto it = derived->find(op.id());
    if (it == derived->end()) {
      OpSuite suite = derive_suite(op);
      add_gradient_cases(op, suite.cases);
      it = derived->emplace(op.id(), std::move(suite)).first;
    }
    out.push_back(it->second);
  }
  return out;
}

std::vector<c10::ScalarType> case_dtypes(const OpDef& op, const Case& c) {
  return c.dtypes.empty() ? op.dtypes : c.dtypes;
}

Result run_case(const OpSuite& suite, const Case& c, c10::ScalarType dtype, c10::Device device) {
  Result r{"", suite.op, c.name, dtype_name(dtype), Outcome::Failed, ""};
  if (c.accelerator_only && device.is_cpu()) {
    r.outcome = Outcome::Skipped;
    r.detail = "mixes the op's device with the CPU; needs a device other than the CPU";
    return r;
  }
  try {
    auto failure = c.check(dtype, device);
    r.outcome = failure ? Outcome::Failed : Outcome::Passed;
    if (failure) r.detail = *failure;
  } catch (const CaseSkipped& e) {
    r.outcome = Outcome::Skipped;
    r.detail = e.what();
  } catch (const c10::Error& e) {
    r.detail = std::string("threw: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    r.detail = std::string("threw: ") + e.what();
  }
  return r;
}

std::vector<Result> check_backend(const BackendRecord& backend, c10::Device device, const std::vector<std::string>& ops,
                                  bool gradients) {
  std::vector<Result> results;
  for (const OpSuite& suite : suites()) {
    if (!ops.empty() && std::find(ops.begin(), ops.end(), suite.op) == ops.end()) continue;
    if (std::find(backend.ops.begin(), backend.ops.end(), suite.op) == backend.ops.end()) {
      results.push_back({backend.name, suite.op, "", "", Outcome::NotImplemented, "not implemented on " + backend.name});
      continue;
    }
    // This backend's kernel, even where another plugin serves the device by default.
    const ScopedPreference only_this(suite.op, {backend.name});
    const OpDef& op = *find_op_def(suite.op);
    for (const auto& c : suite.cases) {
      if (c.gradient && !gradients) continue;
      for (auto dtype : case_dtypes(op, c)) {
        Result r = run_case(suite, c, dtype, device);
        r.backend = backend.name;
        results.push_back(std::move(r));
      }
    }
  }
  return results;
}

std::optional<c10::Device> device_for_key(const std::string& dispatch_key, std::string* why_not) {
  const c10::DispatchKey key = c10::parseDispatchKey(dispatch_key);
  const c10::DeviceType type = c10::dispatchKeyToDeviceType(key);
  if (type == c10::DeviceType::CPU) return c10::Device(type);
  if (!c10::impl::hasDeviceGuardImpl(type)) {
    if (why_not) *why_not = "no " + c10::DeviceTypeName(type, true) + " runtime is registered in this process";
    return std::nullopt;
  }
  if (c10::impl::getDeviceGuardImpl(type)->deviceCount() == 0) {
    if (why_not) *why_not = "no " + c10::DeviceTypeName(type, true) + " device is present";
    return std::nullopt;
  }
  return c10::Device(type, 0);
}

std::vector<c10::ScalarType> measured_dtypes(const BackendRecord& backend, const OpDef& op, c10::Device device) {
  std::vector<c10::ScalarType> accepted;
  if (std::find(backend.ops.begin(), backend.ops.end(), op.id()) == backend.ops.end()) return accepted;
  const OpSuite* suite = nullptr;
  for (const OpSuite& s : suites())
    if (s.op == op.id()) suite = &s;
  if (suite == nullptr || suite->cases.empty()) return accepted;
  const ScopedPreference only_this(op.id(), {backend.name});
  for (auto dtype : op.dtypes)
    if (run_case(*suite, suite->cases.front(), dtype, device).outcome == Outcome::Passed) accepted.push_back(dtype);
  return accepted;
}

}  // namespace backplane::conformance
