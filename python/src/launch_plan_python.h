// What crosses between Python and the launch cache: the plan a recording describes
// (backends/triton/backplane_triton/launch_record.py), the cache's counters, and the test
// recorder that stands in for the driver where there is no GPU. Called with the GIL held.
#pragma once

#include "triton_launch_cache.h"

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <variant>

namespace backplane::python_kernels {

// A recording's outcome: a list of launch descriptions becomes a plan; (why, counts) a refusal.
// A description this cannot read is a refusal that counts, saying what was wrong.
struct Refusal {
  std::string why;
  bool counts = true;
};
std::variant<std::shared_ptr<const LaunchPlan>, Refusal> plan_from_python(pybind11::handle outcome, size_t sources);

pybind11::dict stats_dict(const LaunchCacheStats& stats);

// The test recorder (a LaunchFunction): keeps what would be launched, each parameter decoded
// by its kind, until take_test_launches() hands them to Python as dicts.
std::string test_launch(const KernelLaunch& launch, void** params, const uint64_t* slots, void* stream,
                        c10::DeviceIndex device);
pybind11::list take_test_launches();

}  // namespace backplane::python_kernels
