// backplane._python_kernels: the bridge that lets a plugin of kind triton (manifest.h) serve
// registry ops with Python launchers. `import backplane` calls install(), which sets the
// core's opener for the kind (loader.h, detail::KindOpener); the core's loader then asks it,
// as it would dlopen a library, where the plugin can serve and to offer its kernels.
//
// Each launcher becomes a boxed kernel of this module's, offered through the core's
// detail::offer_kernel, so the core keeps what it owns for every plugin: the manifest's
// contract at registration, the schema, and the per-op, per-size selection between plugins
// serving one device (selection files, BACKPLANE_PREFER, backplane.prefer). Per call the
// kernel runs the op's OpContract (dtypes, devices, shape rule: the core's messages),
// allocates the outputs, returns at once when they are empty, holds a device guard for the
// tensors' device, takes the GIL, converts the IValues to Python objects and calls
// launcher(out..., *arguments) (launcher(*arguments) for an op that writes an argument).
//
// Why an extension rather than the core: converting IValues to Python objects is
// libtorch_python's (torch::jit::toPyObject), and the core must stay free of Python (the C++
// command, the AOTInductor runner and C++ hosts link it without an interpreter). Like
// _fast_call it is built per Python version, where Python's headers are found; without it a
// triton plugin is listed as unavailable, with that reason.
//
// Listing runs none of a plugin's code (target() with opening false: no import), as listing
// never dlopens a library; loading imports Triton and the package.
//
// The GIL. A kernel takes it with no lock of ours held (the dispatcher and the selection's
// selector hold none while a kernel runs) and only then calls Python. The loader calls
// target()/offer() with its own mutex held, so no thread may hold the GIL while waiting for
// the loader's mutex: every Python entry to the loader goes through ctypes (CDLL releases
// the GIL for the call), and nothing here calls the loader. A kernel called after the
// interpreter has finalized raises c10::Error instead of touching Python.
//
// Exceptions: a launcher's Python exception, or a result other than None, becomes a
// c10::Error naming the op and the plugin (RuntimeError in Python). Nothing here lets an
// exception cross into the dispatcher untyped, so the process never ends over one.
//
// The launch cache (triton_launch_cache.h). Where the plugin's package has a module
// launch_record (its record_call(launcher, values, fake) runs the launcher and describes the
// kernel launches it made: backends/triton/backplane_triton/launch_record.py), a call with a
// key is looked up first: a hit launches the recorded kernels from C++ on the current CUDA
// stream (cuda_driver_launch.h), with no GIL and no Python; a miss runs the launcher through
// record_call and keeps the plan it gives. No key (a CPU tensor, a string argument), a dispatch
// mode set (tracing), or BACKPLANE_TRITON_LAUNCH_CACHE=0 when the plugin loads: Python, as
// without a cache. The cache only ever replays what Python launched for an identical key.
// Test mode (_launch_cache_test_mode, for machines without a GPU): keys take CPU tensors (the
// interpreter's), recordings describe the kernels from their Python signatures, and a replay
// is recorded (_launch_cache_test_launches) instead of launched.
//
// Limits: each call on the Python path costs a Python call and the conversion of its
// arguments (microseconds), on top of the launch itself; the Python objects a kernel holds
// (its launcher, the recorder) are never released, as the dispatcher's kernels live until the
// process ends.
#include <backplane/loader.h>
#include <backplane/plugin/kernel.h>
#include <backplane/plugin/op_contract.h>
#include <backplane/registry.h>

#include "cuda_driver_launch.h"
#include "launch_plan_python.h"
#include "plugins/version_range.h"
#include "triton_launch_cache.h"
#include "util/strings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <Python.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace backplane::python_kernels {
namespace {

// Whether Python can still be called: not before it starts, nor once it is finalizing (a
// thread taking the GIL then would hang or crash the exit).
bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

std::atomic<bool> test_mode{false};

// Keys the launch cache holds at most per op of a plugin.
constexpr size_t kLaunchCacheCapacity = 512;

// Every op's cache, for the counters and for clearing: "op@plugin" -> cache.
struct LaunchCaches {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::shared_ptr<LaunchCache>>> caches;
};
LaunchCaches& launch_caches() {
  static auto* caches = new LaunchCaches();  // never destroyed: kernels hold its caches
  return *caches;
}

bool launch_cache_enabled() {
  const char* v = std::getenv("BACKPLANE_TRITON_LAUNCH_CACHE");
  return v == nullptr || std::string(v) != "0";
}

class LauncherKernel final : public c10::OperatorKernel {
 public:
  // launcher, recorder: new references (recorder may be null: no cache), kept for the process
  // (never released: see the top); cache null where the cache is off.
  LauncherKernel(const OpDef& def, size_t arguments, std::string plugin, std::string kind, PyObject* launcher,
                 PyObject* recorder, std::shared_ptr<LaunchCache> cache)
      : contract_(def.qualified_name()),
        writes_(def.writes()),
        outputs_(def.writes() ? 0 : def.new_outputs()),
        arguments_(arguments),
        who_(def.qualified_name() + ": the launcher of the " + kind + " plugin '" + plugin + "'"),
        launcher_(launcher),
        recorder_(recorder),
        cache_(std::move(cache)) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    auto args = torch::jit::last(*stack, arguments_);
    std::vector<at::Tensor> outs;
    if (detail::boxed_contract(contract_, writes_, outputs_, args, outs)) call(args, outs);
    torch::jit::drop(*stack, arguments_);
    for (auto& out : outs) stack->emplace_back(std::move(out));
  }

 private:
  void call(c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs) const {
    const auto device = detail::first_boxed_device(args);
    const auto guard = detail::device_guard(device);
    std::optional<LaunchKey> key;
    const bool test = test_mode.load(std::memory_order_relaxed);
    if (cache_ && device && !c10::impl::TorchDispatchModeTLS::any_modes_set())
      key = launch_key(outs, args, test ? c10::DeviceType::CPU : c10::DeviceType::CUDA);
    if (key) {
      const auto found = cache_->find(*key);
      if (found.plan) {
        const std::string error =
            replay(*found.plan, outs, args, test ? nullptr : current_cuda_stream(device->index()), device->index(),
                   test ? test_launch : cuda_launch);
        TORCH_CHECK(error.empty(), who_, ": replaying the launches recorded for these shapes: ", error);
        return;
      }
      if (found.python_only) key.reset();
    }
    call_python(args, outs, key ? &*key : nullptr, test);
  }

  // The launcher through Python; through the recorder, keeping what it gives, when `key`.
  void call_python(c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs, const LaunchKey* key,
                   bool test) const {
    TORCH_CHECK(python_alive(), who_, " cannot run: Python has shut down in this process");
    std::string error;
    {
      py::gil_scoped_acquire gil;
      try {
        py::tuple values(outs.size() + args.size());
        size_t i = 0;
        for (const auto& out : outs) values[i++] = torch::jit::toPyObject(c10::IValue(out));
        for (const auto& a : args) values[i++] = torch::jit::toPyObject(a);
        py::object result;
        if (key) {
          const auto recorded =
              py::reinterpret_borrow<py::object>(recorder_)(py::handle(launcher_), values, test).cast<py::tuple>();
          result = recorded[0];
          keep(*key, plan_from_python(recorded[1], values.size()), outs, args);
        } else {
          result = py::reinterpret_borrow<py::object>(launcher_)(*values);
        }
        if (!result.is_none())
          error = " returned " + std::string(py::str(py::type::of(result).attr("__name__"))) +
                  "; a launcher writes the outputs it is given and returns None";
      } catch (py::error_already_set& e) {
        error = " raised " + std::string(e.what());
      } catch (const std::exception& e) {  // a conversion pybind11 could not make
        error = " could not be called: " + std::string(e.what());
      }
    }
    TORCH_CHECK(error.empty(), who_, error);
  }

  void keep(const LaunchKey& key, const std::variant<std::shared_ptr<const LaunchPlan>, Refusal>& outcome,
            const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args) const {
    if (const auto* plan = std::get_if<std::shared_ptr<const LaunchPlan>>(&outcome)) {
      const std::string mismatch = plan_mismatch(**plan, outs, args);
      if (mismatch.empty()) cache_->store(key, *plan);
      else cache_->refuse(key, "the recording does not fit the call: " + mismatch, true);
    } else {
      const auto& refusal = std::get<Refusal>(outcome);
      cache_->refuse(key, refusal.why, refusal.counts);
    }
  }

  OpContract contract_;
  bool writes_;
  size_t outputs_;
  size_t arguments_;
  std::string who_;  // "backplane::add: the launcher of the triton plugin 'x'", for errors
  PyObject* launcher_;
  PyObject* recorder_;
  std::shared_ptr<LaunchCache> cache_;
};

// The Python functions install() was given (new references, kept for the process).
struct KindFunctions {
  std::string kind;
  PyObject* target = nullptr;     // target(record, opening) -> (dispatch_key, note, unavailable)
  PyObject* launchers = nullptr;  // launchers(record) -> {op: launcher}
  PyObject* recorder = nullptr;   // recorder(record) -> record_call, or None (no launch cache)
};

py::dict record_dict(const BackendRecord& r) {
  py::dict d;
  d["name"] = r.name;
  d["path"] = r.path;
  d["version"] = r.version;
  d["dispatch_key"] = r.dispatch_key;
  d["ops"] = r.ops;
  d["python_module"] = r.python_module;
  d["python_path"] = r.python_path;
  d["kind"] = r.kind;
  d["triton_versions"] = r.triton_versions;
  d["torch_versions"] = r.torch_target;
  return d;
}

std::string python_error(py::error_already_set& e) { return e.what(); }

detail::KindTarget target(const KindFunctions& fns, const BackendRecord& record, bool opening) {
  TORCH_CHECK(python_alive(), "Python has shut down in this process");
  py::gil_scoped_acquire gil;
  try {
    const auto t = py::reinterpret_borrow<py::object>(fns.target)(record_dict(record), opening).cast<py::tuple>();
    return {t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::string>()};
  } catch (py::error_already_set& e) {
    throw std::runtime_error(python_error(e));
  } catch (const py::cast_error& e) {
    throw std::runtime_error(std::string("the bridge's target() gave no (key, note, unavailable): ") + e.what());
  }
}

// The ops `launchers` serves that the manifest does not list (in the package's order), and
// those the manifest lists that it does not serve (in the manifest's).
std::pair<std::vector<std::string>, std::vector<std::string>> mismatch(
    const std::vector<std::pair<std::string, PyObject*>>& launchers, const std::vector<std::string>& declared) {
  std::vector<std::string> undeclared, unserved, served;
  for (const auto& [op, _] : launchers) {
    const OpDef* def = find_op_def(op);
    served.push_back(def ? def->id() : op);
    if (std::find(declared.begin(), declared.end(), served.back()) == declared.end()) undeclared.push_back(op);
  }
  for (const auto& op : declared)
    if (std::find(served.begin(), served.end(), op) == served.end()) unserved.push_back(op);
  return {undeclared, unserved};
}

// Where kernels() keys one of the plugin's own ops by its bare name ("scale_add") and the
// manifest lists it by id ("tlx::scale_add"), what to change; nullopt otherwise.
std::optional<std::string> own_op_keyed_by_name(const std::vector<std::string>& undeclared,
                                                const std::vector<std::string>& declared) {
  for (const auto& op : undeclared)
    for (const auto& listed : declared)
      if (listed.size() > op.size() + 2 && listed.compare(listed.size() - op.size() - 2, std::string::npos, "::" + op) == 0)
        return "kernels() names a plugin's own op by its id, as the manifest does: '" + listed + "', not '" + op + "'";
  return std::nullopt;
}

std::optional<std::string> offer(const KindFunctions& fns, const BackendRecord& record) {
  if (!python_alive()) return std::string("Python has shut down in this process");
  std::vector<std::pair<std::string, PyObject*>> launchers;  // new references
  PyObject* recorder = nullptr;                               // a new reference, or none
  {
    py::gil_scoped_acquire gil;
    try {
      const py::dict given = py::reinterpret_borrow<py::object>(fns.launchers)(record_dict(record)).cast<py::dict>();
      for (const auto& [op, launcher] : given) launchers.emplace_back(op.cast<std::string>(), launcher.inc_ref().ptr());
      if (fns.recorder != nullptr && launch_cache_enabled()) {
        const py::object r = py::reinterpret_borrow<py::object>(fns.recorder)(record_dict(record));
        if (!r.is_none()) recorder = r.inc_ref().ptr();
      }
    } catch (py::error_already_set& e) {
      return "its package '" + record.python_module + "' gave no kernels: " + python_error(e);
    } catch (const py::cast_error& e) {
      return "its package '" + record.python_module + "': kernels() must return a dict of op name -> launcher (" +
             e.what() + ")";
    }
  }
  // Refused before anything is offered, naming both lists: "no list of ops but the registry"
  // holds when the manifest says exactly what the package serves, no more (the listing of a
  // plugin not loaded shows the manifest's ops) and no less.
  const auto [undeclared, unserved] = mismatch(launchers, record.ops);
  if (!undeclared.empty())
    return "its package '" + record.python_module + "' serves [" + detail::join(undeclared) + "], which its manifest " +
           record.path + " does not list (it lists [" + detail::join(record.ops) + "]): " +
           own_op_keyed_by_name(undeclared, record.ops).value_or("add them to the manifest's ops");
  if (!unserved.empty())
    return "its manifest " + record.path + " lists [" + detail::join(unserved) + "], which its package '" +
           record.python_module + "' does not serve (its kernels() has no launcher for them): take them out of the "
           "manifest's ops";
  const c10::DispatchKey key = c10::parseDispatchKey(record.dispatch_key);
  static std::mutex mutex;
  static auto* libraries = new std::list<torch::Library>();  // each offer's registration lives as long
  for (const auto& [op, launcher] : launchers) {
    const OpDef* def = find_op_def(op);  // undeclared() found it in the manifest, which the loader checked
    if (def == nullptr) return "its package '" + record.python_module + "' serves '" + op + "', which no registry defines";
    const auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(def->qualified_name(), ""));
    if (!handle) return def->qualified_name() + " is not defined in this process";
    const size_t arguments = handle->schema().arguments().size();
    std::lock_guard<std::mutex> lock(mutex);
    torch::Library& m = libraries->emplace_back(torch::Library::IMPL, def->ns, key, __FILE__, __LINE__);
    // Two kernels (offer_kernel keeps one for the selector, registers the other directly
    // while it is the only offer); both hold the same launcher and cache (the recorder is
    // kept for the process, one reference for all).
    Py_INCREF(launcher);
    std::shared_ptr<LaunchCache> cache;
    if (recorder != nullptr) {
      cache = std::make_shared<LaunchCache>(kLaunchCacheCapacity);
      std::lock_guard<std::mutex> caches_lock(launch_caches().mutex);
      launch_caches().caches.emplace_back(def->qualified_name() + "@" + record.name, cache);
    }
    detail::offer_kernel(
        m, def->qualified_name().c_str(), key,
        c10::KernelFunction::makeFromBoxedFunctor(
            std::make_unique<LauncherKernel>(*def, arguments, record.name, fns.kind, launcher, recorder, cache)),
        torch::CppFunction::makeFromBoxedFunctor(
            std::make_unique<LauncherKernel>(*def, arguments, record.name, fns.kind, launcher, recorder, cache)));
  }
  return std::nullopt;
}

// install(kind, target, launchers, recorder): sets the core's opener for `kind`. Called again,
// it replaces the functions (the old ones stay referenced: a copy of the opener may run).
void install(const std::string& kind, py::object target_fn, py::object launchers_fn, py::object recorder_fn) {
  auto fns = std::make_shared<KindFunctions>();
  fns->kind = kind;
  fns->target = target_fn.inc_ref().ptr();
  fns->launchers = launchers_fn.inc_ref().ptr();
  if (!recorder_fn.is_none()) fns->recorder = recorder_fn.inc_ref().ptr();
  // The opener is copied by the loader without the GIL: it captures only a shared_ptr to
  // raw references, which copying never touches.
  detail::set_kind_opener(kind, {[fns](const BackendRecord& r, bool opening) { return target(*fns, r, opening); },
                                 [fns](const BackendRecord& r) { return offer(*fns, r); }});
}

py::dict launch_cache_stats() {
  py::dict out;
  std::lock_guard<std::mutex> lock(launch_caches().mutex);
  for (const auto& [name, cache] : launch_caches().caches) out[py::str(name)] = stats_dict(cache->stats());
  return out;
}

void launch_cache_clear() {
  std::lock_guard<std::mutex> lock(launch_caches().mutex);
  for (const auto& [name, cache] : launch_caches().caches) cache->clear();
}

}  // namespace
}  // namespace backplane::python_kernels

PYBIND11_MODULE(_python_kernels, m) {
  m.doc() = "The bridge between the core and plugins whose kernels are Python launchers (kind: triton)";
  m.def("install", &backplane::python_kernels::install, py::arg("kind"), py::arg("target"), py::arg("launchers"),
        py::arg("recorder") = py::none(),
        "Sets the core's opener for plugins of `kind`: target(record, opening) -> (dispatch_key, note, unavailable), "
        "launchers(record) -> {op: launcher} and recorder(record) -> record_call or None (the launch cache's).");
  namespace pk = backplane::python_kernels;
  m.def("launch_cache_stats", &pk::launch_cache_stats,
        "{'op@plugin': {hits, recorded, stored, refused, python_only, entries, last_refusal}} of every launch cache.");
  m.def("launch_cache_clear", &pk::launch_cache_clear, "Empties every launch cache and zeroes its counters.");
  m.def("_launch_cache_test_mode", [](bool on) { pk::test_mode.store(on); }, py::arg("on"),
        "Tests without a GPU: keys take CPU tensors, recordings are faked from signatures, replays are recorded.");
  m.def("_launch_cache_test_launches", &pk::take_test_launches,
        "The launches replayed in test mode since the last call, oldest first.");
  m.def("version_in_range", &backplane::version_in_range, py::arg("version"), py::arg("range"),
        "Whether version lies in a manifest's version range (the core's reader); ValueError for a bad range.");
}
