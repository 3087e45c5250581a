// The conformance suite: every registry op checked against PyTorch (aten on the
// CPU) on any backend, named by the device it computes on. One suite serves the
// gtest runner (tests/cpp/conformance_test.cpp, one test per op x case x dtype)
// and `backplane check`, so a vendor runs exactly what CI runs.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {

// One check of one op: returns nullopt when it passes, or what went wrong.
using CheckFn = std::function<std::optional<std::string>(c10::ScalarType dtype, c10::Device device)>;

struct Case {
  std::string name;  // "broadcast", "strided", "bad_dtype", ...
  CheckFn check;
  // Skipped on the CPU: mixing devices needs a device other than the CPU.
  bool accelerator_only = false;
};

struct OpSuite {
  std::string op;
  std::vector<Case> cases;
};

// Every op's suite, in registry order. Throws if an op in the registry has none,
// so a new op cannot ship untested.
const std::vector<OpSuite>& suites();

struct Result {
  std::string op, case_name, dtype;
  bool passed = false;
  bool skipped = false;
  std::string detail;
};

// Runs one case for one dtype; exceptions become failures with their message.
Result run_case(const OpSuite& suite, const Case& c, c10::ScalarType dtype, c10::Device device);
// Every op x case x registry dtype on device.
std::vector<Result> run_all(c10::Device device);

// The device a dispatch key computes on ("CPU" -> cpu, "CUDA" -> cuda:0,
// "PrivateUse1" -> the registered backend's device 0), or nullopt with the reason
// (no such device in this process).
std::optional<c10::Device> device_for_key(const std::string& dispatch_key, std::string* why_not);

}  // namespace backplane::conformance
