// Python <-> launch cache (launch_plan_python.h).
#include "launch_plan_python.h"

#include <cstring>
#include <mutex>
#include <stdexcept>

namespace py = pybind11;

namespace backplane::python_kernels {
namespace {

uint8_t bytes_of(int64_t bits) {
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    throw std::invalid_argument("a width of " + std::to_string(bits) + " bits (expected 8, 16, 32 or 64)");
  return static_cast<uint8_t>(bits / 8);
}

uint32_t source_of(int64_t k, size_t sources) {
  if (k < 0 || static_cast<size_t>(k) >= sources)
    throw std::invalid_argument("source " + std::to_string(k) + " of a call with " + std::to_string(sources) +
                                " outputs and arguments");
  return static_cast<uint32_t>(k);
}

LaunchParam param_from(const py::tuple& t, size_t sources) {
  const std::string kind = t[0].cast<std::string>();
  LaunchParam p;
  if (kind == "ptr") {
    p = {LaunchParam::kPointer, 8, source_of(t[1].cast<int64_t>(), sources), t[2].cast<int64_t>()};
  } else if (kind == "int") {
    p.kind = LaunchParam::kInt;
    p.bytes = bytes_of(t[1].cast<int64_t>());
    // Unsigned 64-bit values above INT64_MAX keep their bits.
    p.value = t[2].cast<bool>() ? t[3].cast<int64_t>() : static_cast<int64_t>(t[3].cast<uint64_t>());
  } else if (kind == "float" || kind == "const_float") {
    p.bytes = bytes_of(t[1].cast<int64_t>());
    if (p.bytes != 4 && p.bytes != 8) throw std::invalid_argument("a float of " + std::to_string(p.bytes * 8) + " bits");
    if (kind == "float") {
      p.kind = LaunchParam::kFloat;
      p.source = source_of(t[2].cast<int64_t>(), sources);
    } else {
      p.kind = LaunchParam::kConstFloat;
      const double d = t[2].cast<double>();
      const float f = static_cast<float>(d);
      std::memcpy(&p.value, p.bytes == 4 ? static_cast<const void*>(&f) : &d, p.bytes);
    }
  } else if (kind == "null") {
    p.kind = LaunchParam::kNull;
  } else {
    throw std::invalid_argument("a parameter of kind '" + kind + "' (expected ptr, int, float, const_float or null)");
  }
  return p;
}

KernelLaunch launch_from(const py::dict& d, size_t sources) {
  KernelLaunch l;
  l.function = d["function"].cast<uint64_t>();
  const auto grid = d["grid"].cast<py::tuple>();
  if (grid.size() != 3) throw std::invalid_argument("a grid of " + std::to_string(grid.size()) + " sizes (expected 3)");
  for (size_t i = 0; i < 3; ++i) l.grid[i] = grid[i].cast<uint32_t>();
  l.threads = d["threads"].cast<uint32_t>();
  l.shared = d["shared"].cast<uint32_t>();
  const auto params = d["params"].cast<py::list>();
  if (params.size() > kMaxLaunchParams)
    throw std::invalid_argument(std::to_string(params.size()) + " parameters (at most " +
                                std::to_string(kMaxLaunchParams) + ")");
  for (const auto& p : params) l.params.push_back(param_from(p.cast<py::tuple>(), sources));
  return l;
}

struct TestLaunches {
  std::mutex mutex;
  std::vector<std::pair<KernelLaunch, std::vector<uint64_t>>> launches;
};
TestLaunches& test_launches() {
  static auto* t = new TestLaunches();  // never destroyed: a kernel may record at exit
  return *t;
}

}  // namespace

std::variant<std::shared_ptr<const LaunchPlan>, Refusal> plan_from_python(py::handle outcome, size_t sources) {
  try {
    if (py::isinstance<py::tuple>(outcome)) {
      const auto t = outcome.cast<py::tuple>();
      return Refusal{t[0].cast<std::string>(), t[1].cast<bool>()};
    }
    auto plan = std::make_shared<LaunchPlan>();
    for (const auto& d : outcome.cast<py::list>()) plan->launches.push_back(launch_from(d.cast<py::dict>(), sources));
    if (plan->launches.empty()) return Refusal{"the recording holds no launch", true};
    return std::shared_ptr<const LaunchPlan>(std::move(plan));
  } catch (const std::exception& e) {  // py::cast_error, py::error_already_set, invalid_argument
    return Refusal{std::string("the recording could not be read: ") + e.what(), true};
  }
}

py::dict stats_dict(const LaunchCacheStats& s) {
  py::dict d;
  d["hits"] = s.hits;
  d["recorded"] = s.recorded;
  d["stored"] = s.stored;
  d["refused"] = s.refused;
  d["python_only"] = s.python_only;
  d["entries"] = s.entries;
  d["last_refusal"] = s.last_refusal;
  return d;
}

std::string test_launch(const KernelLaunch& launch, void**, const uint64_t* slots, void*, c10::DeviceIndex) {
  auto& t = test_launches();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.launches.emplace_back(launch, std::vector<uint64_t>(slots, slots + launch.params.size()));
  return "";
}

py::list take_test_launches() {
  auto& t = test_launches();
  std::vector<std::pair<KernelLaunch, std::vector<uint64_t>>> taken;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    taken.swap(t.launches);
  }
  py::list out;
  for (const auto& [l, slots] : taken) {
    py::list params;
    for (size_t i = 0; i < l.params.size(); ++i) {
      const LaunchParam& p = l.params[i];
      if (p.kind == LaunchParam::kPointer) {
        params.append(py::make_tuple("ptr", slots[i]));
      } else if (p.kind == LaunchParam::kInt) {
        int64_t v = 0;
        std::memcpy(&v, &slots[i], p.bytes);
        // Shown as signed (the tests pass no unsigned parameter).
        if (p.bytes < 8 && (v >> (8 * p.bytes - 1)) & 1) v -= int64_t(1) << (8 * p.bytes);
        params.append(py::make_tuple("int", p.bytes * 8, v));
      } else if (p.kind == LaunchParam::kFloat || p.kind == LaunchParam::kConstFloat) {
        double d = 0;
        float f = 0;
        if (p.bytes == 4) std::memcpy(&f, &slots[i], 4), d = f;
        else std::memcpy(&d, &slots[i], 8);
        params.append(py::make_tuple("float", p.bytes * 8, d));
      } else {
        params.append(py::make_tuple("null", slots[i]));
      }
    }
    py::dict d;
    d["function"] = l.function;
    d["grid"] = py::make_tuple(l.grid[0], l.grid[1], l.grid[2]);
    d["threads"] = l.threads;
    d["shared"] = l.shared;
    d["params"] = params;
    out.append(d);
  }
  return out;
}

}  // namespace backplane::python_kernels
