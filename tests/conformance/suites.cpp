#include "conformance.h"
#include "op_suites.h"

#include <backplane/registry.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/TensorOptions.h>

#include <map>

namespace backplane::conformance {

const std::vector<OpSuite>& suites() {
  static const std::vector<OpSuite> all = [] {
    const std::map<std::string, OpSuite (*)()> by_op = {
        {"identity_conv", &identity_conv_suite}, {"add", &add_suite},   {"scale_", &scale_suite},
        {"sin_out", &sin_out_suite},             {"crop", &crop_suite}, {"rms_norm", &rms_norm_suite},
    };
    std::vector<OpSuite> ordered;
    for (const auto& op : registry().ops()) {
      auto it = by_op.find(op.name);
      TORCH_CHECK(it != by_op.end(), "conformance: registry op '", op.name,
                  "' has no suite; add tests/conformance/", op.name, ".cpp");
      ordered.push_back(it->second());
    }
    return ordered;
  }();
  return all;
}

Result run_case(const OpSuite& suite, const Case& c, c10::ScalarType dtype, c10::Device device) {
  Result r{suite.op, c.name, dtype_name(dtype), false, false, ""};
  if (c.accelerator_only && device.is_cpu()) {
    r.skipped = true;
    r.detail = "mixes the op's device with the CPU; needs a device other than the CPU";
    return r;
  }
  try {
    auto failure = c.check(dtype, device);
    r.passed = !failure.has_value();
    if (failure) r.detail = *failure;
  } catch (const c10::Error& e) {
    r.detail = std::string("threw: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    r.detail = std::string("threw: ") + e.what();
  }
  return r;
}

std::vector<Result> run_all(c10::Device device) {
  std::vector<Result> results;
  for (const auto& suite : suites())
    for (const auto& c : suite.cases)
      for (auto dtype : registry().find(suite.op)->dtypes) results.push_back(run_case(suite, c, dtype, device));
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

}  // namespace backplane::conformance
