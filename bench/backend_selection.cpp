#include "backend_selection.h"

#include <c10/core/DispatchKey.h>
#include <c10/core/TensorOptions.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace backplane::bench {
namespace {

// The same mapping as the conformance suite's device_for_key (tests/conformance), kept
// here so the benchmark depends on nothing under tests/.
std::optional<c10::Device> device_for_key(const std::string& dispatch_key, std::string* why_not) {
  const c10::DeviceType type = c10::dispatchKeyToDeviceType(c10::parseDispatchKey(dispatch_key));
  if (type == c10::DeviceType::CPU) return c10::Device(type);
  if (!c10::impl::hasDeviceGuardImpl(type)) {
    *why_not = "no " + c10::DeviceTypeName(type, true) + " runtime is registered in this process";
    return std::nullopt;
  }
  if (c10::impl::getDeviceGuardImpl(type)->deviceCount() == 0) {
    *why_not = "no " + c10::DeviceTypeName(type, true) + " device is present";
    return std::nullopt;
  }
  return c10::Device(type, 0);
}

}  // namespace

BackendSelection select_backends(const std::vector<std::string>& names) {
  BackendSelection selection;
  for (const auto& name : names) {
    BackendRecord record;
    try {
      record = load(name);
    } catch (const std::exception& e) {  // BackendError, or anything the plugin threw
      selection.skipped.push_back({name, e.what()});
      continue;
    }
    std::string why_not;
    auto device = device_for_key(record.dispatch_key, &why_not);
    if (!device) {
      selection.skipped.push_back({name, why_not});
      continue;
    }
    selection.selected.push_back(
        {name, *device, std::set<std::string>(record.ops.begin(), record.ops.end()), std::move(record)});
  }
  return selection;
}

}  // namespace backplane::bench
