// The conformance suite: every registry op checked against its registry entry on any
// backend. The cases derive from the registry alone: each sample in every layout
// (contiguous, strided, transposed, offset, expanded, permuted) and dtype, compared with the
// entry's `reference` (PyTorch on the CPU); the contract's own errors (dtypes, devices,
// aliasing, sizes); the entry's `errors`; each `backward:` formula against autograd through
// the reference (gradient cases, gradient_cases.cpp). A new op gets its suite with no code, and a
// vendor runs exactly what CI runs: `backplane check`, the gtest runner, the scaffold's
// test and Python's backplane.check() all call this.
#pragma once

#include <backplane/export.h>
#include <backplane/loader.h>
#include <backplane/registry.h>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::conformance {

// One check of one op: nullopt when it passes, else what went wrong.
using CheckFn = std::function<std::optional<std::string>(c10::ScalarType dtype, c10::Device device)>;

struct Case {
  std::string name;  // "4x33/strided", "error/bad_dtype", "gradient/4x33", ...
  CheckFn check;
  bool accelerator_only = false;  // mixes the op's device with the CPU
  // Compares the op's `backward:` formulas with autograd through its reference: the
  // "gradient" kind, which check_backend(..., gradients=false) leaves out.
  bool gradient = false;
  // The dtypes it runs in; empty: every dtype of the op's registry entry.
  std::vector<c10::ScalarType> dtypes;
};

// The dtypes case `c` of op runs in (its own, else the op's): what the runners iterate.
BACKPLANE_API std::vector<c10::ScalarType> case_dtypes(const OpDef& op, const Case& c);

// Thrown by a check that cannot run here (what() says why): its result is Skipped.
class BACKPLANE_API CaseSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpSuite {
  std::string op;
  std::vector<Case> cases;
};

// One per op of all_ops(), in its order (derived once per op, on first use).
BACKPLANE_API std::vector<std::reference_wrapper<const OpSuite>> suites();

enum class Outcome { Passed, Failed, Skipped, NotImplemented };
BACKPLANE_API const char* to_string(Outcome outcome);

struct Result {
  std::string backend, op, case_name, dtype;
  Outcome outcome = Outcome::Failed;
  std::string detail;
};

// One case for one dtype; exceptions become failures with their message.
BACKPLANE_API Result run_case(const OpSuite& suite, const Case& c, c10::ScalarType dtype, c10::Device device);

// Every op (or those named) x case x its dtypes on a loaded backend, calling that
// backend's kernels even where another plugin serves the same device. An op the backend
// does not implement gives one NotImplemented result: "not implemented on BACKEND".
// gradients=false leaves out the gradient cases (`backplane check --no-gradients`).
BACKPLANE_API std::vector<Result> check_backend(const BackendRecord& backend, c10::Device device,
                                                const std::vector<std::string>& ops = {}, bool gradients = true);

// The device a dispatch key computes on ("CPU" -> cpu, "CUDA" -> cuda:0,
// "PrivateUse1" -> the registered backend's device 0), or nullopt with the reason.
BACKPLANE_API std::optional<c10::Device> device_for_key(const std::string& dispatch_key, std::string* why_not);

// The registry dtypes for which op's first sample runs on the backend and matches the
// reference: what the backend was measured to accept, rather than what it claims.
BACKPLANE_API std::vector<c10::ScalarType> measured_dtypes(const BackendRecord& backend, const OpDef& op,
                                                           c10::Device device);

}  // namespace backplane::conformance
