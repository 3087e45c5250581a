// `backplane new-backend NAME --dispatch-key KEY [--dir DIR]`: writes a self-contained
// plugin project that builds against an installed Backplane (find_package(Backplane)),
// out of this repository: CMakeLists.txt, one kernel file per registry op (a stub with
// the op's C++ signature, unregistered, so the backend starts with every op "not
// implemented"), a README, a conformance test and a pyproject.toml for its own wheel.
// For PrivateUse1 it also writes a running device: the npu plugin's device layer
// (emulated driver, allocator, guard, streams, hooks, copies, CPU fallback, device
// module and its device-level tests), renamed, from the template that ships with
// Backplane (share/backplane/templates/PrivateUse1, which is backends/npu).
#include "cli.h"

#include <backplane/registry.h>

#include <c10/core/Device.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

// The C++ parameter type a kernel takes for a schema argument; empty when the scaffold
// cannot say (the stub then names the schema type for the vendor to fill in).
std::string cpp_type(const c10::Argument& arg) {
  const c10::TypePtr& type = arg.type();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return arg.alias_info() && arg.alias_info()->isWrite() ? "at::Tensor&" : "const at::Tensor&";
    case c10::TypeKind::NumberType: return "const at::Scalar&";
    case c10::TypeKind::FloatType: return "double";
    case c10::TypeKind::IntType: return "int64_t";
    case c10::TypeKind::SymIntType: return "int64_t";
    case c10::TypeKind::BoolType: return "bool";
    case c10::TypeKind::StringType: return "c10::string_view";
    case c10::TypeKind::ListType: {
      const auto element = type->containedType(0)->kind();
      if (element == c10::TypeKind::IntType || element == c10::TypeKind::SymIntType) return "at::IntArrayRef";
      if (element == c10::TypeKind::FloatType) return "at::ArrayRef<double>";
      if (element == c10::TypeKind::TensorType) return "at::TensorList";
      break;
    }
    case c10::TypeKind::OptionalType:
      if (type->containedType(0)->kind() == c10::TypeKind::TensorType) return "const std::optional<at::Tensor>&";
      break;
    default: break;
  }
  return "/* " + type->str() + ": fill in the C++ type */ auto";
}

bool lower(char c) { return std::islower(static_cast<unsigned char>(c)) != 0; }
bool upper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }
bool letter(char c) { return lower(c) || upper(c); }

// npu -> name, Npu -> Name, NPU -> NAME wherever the template's device name stands as a
// word or a part of an identifier (npuMalloc, kNpu, BACKPLANE_NPU_X, backplane_npu),
// never inside another word (input, INPUT).
std::string rename_device(const std::string& text, const std::string& name) {
  std::string capital = name, shout = name;
  capital[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(capital[0])));
  for (char& c : shout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char before = i > 0 ? text[i - 1] : ' ';
    const char after = i + 3 < text.size() ? text[i + 3] : ' ';
    if (text.compare(i, 3, "npu") == 0 && !letter(before) && !lower(after)) {
      out += name;
    } else if (text.compare(i, 3, "Npu") == 0 && !upper(before) && !lower(after)) {
      out += capital;
    } else if (text.compare(i, 3, "NPU") == 0 && !letter(before) && !upper(after)) {
      out += shout;
    } else {
      out += text[i++];
      continue;
    }
    i += 3;
  }
  return out;
}

// The PrivateUse1 template: installed beside the command (share/backplane/templates), or
// the source tree's backends/npu for a command run from a build directory.
std::optional<fs::path> privateuse1_template() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "backplane" / "templates" / "PrivateUse1");
#ifdef BACKPLANE_NPU_SOURCE_DIR
  candidates.push_back(BACKPLANE_NPU_SOURCE_DIR);
#endif
  for (const auto& dir : candidates)
    if (fs::is_directory(dir / "runtime")) return fs::canonical(dir);
  return std::nullopt;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string kernel_stub(const OpDef& op, const std::string& name, const std::string& key) {
  const bool writes = op.writes();
  // One output: `out`; several (rms_norm_backward's dx and dweight): out0, out1, ...
  std::string params;
  for (size_t k = 0; k < op.new_outputs(); ++k)
    params += (params.empty() ? "" : ", ") + std::string("at::Tensor& out") + (op.new_outputs() == 1 ? "" : std::to_string(k));
  for (const c10::Argument& arg : op.arguments)
    params += (params.empty() ? "" : ", ") + cpp_type(arg) + " " + arg.name();
  std::ostringstream s;
  s << "// backplane::" << op.schema << "\n"
    << "//   " << op.doc << "\n//\n"
    << "// Before this runs, the core has checked the op's contract (the registry's dtypes, one dtype\n"
    << "// and one device across the Tensor arguments, the shape rule)"
    << (writes ? "" : op.new_outputs() == 1 ? ", allocated `out` with\n// the result's sizes" : ", allocated the outputs with\n// their sizes")
    << " and set a device guard.\n"
    << (op.shape.kind == ShapeRuleKind::Broadcast
            ? "// The output follows the layout of a transposed or permuted input (as aten's do): honour\n"
              "// out's strides (TensorIterator and aten's out= ops do).\n"
            : "")
    << "// To implement: write the compute, then uncomment the registration at the foot, rebuild,\n"
    << "// and run `backplane check " << name << " --ops " << op.name << "`.\n";
  if (key == "PrivateUse1")
    s << "// Device work is queued on the current stream with launch() from ../launch.h, e.g.\n"
      << "//   launch(out.device().index(), \"backplane::" << op.name << "\", [=] { /* host_view(out) = ... */ });\n"
      << "// as backends/npu/kernels/ do in Backplane's source.\n";
  s << "#include <backplane/kernel.h>\n\n"
    << "namespace " << (key == "PrivateUse1" ? "backplane::" : "") << name << " {\n\n"
    << "void " << op.name << "(" << params << ") {\n"
    << "  TORCH_CHECK_NOT_IMPLEMENTED(false, \"" << name << ": backplane::" << op.name
    << " is not implemented yet (kernels/" << op.name << ".cpp)\");\n"
    << "}\n\n"
    << "}  // namespace " << (key == "PrivateUse1" ? "backplane::" : "") << name << "\n\n"
    << "// " << (writes ? "BACKPLANE_WRITING_KERNEL(" : "BACKPLANE_KERNEL(") << key << ", " << op.name << ", "
    << (key == "PrivateUse1" ? "backplane::" : "") << name << "::" << op.name << ")\n";
  return s.str();
}

std::string cmake_lists(const std::string& name, const std::string& key) {
  const bool device = key == "PrivateUse1";
  std::ostringstream s;
  s << "# The '" << name << "' Backplane backend (" << key << "), built out of the Backplane tree.\n"
    << "#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<Backplane prefix>   # or nothing: see below\n"
    << "#   cmake --build build && ctest --test-dir build\n"
    << "cmake_minimum_required(VERSION 3.22)\n"
    << "project(backplane_" << name << " VERSION 0.1.0 LANGUAGES CXX" << (key == "CUDA" ? " CUDA" : "") << ")\n\n"
    << "# Without CMAKE_PREFIX_PATH, ask the Python that has the backplane wheel where it is.\n"
    << "find_package(Backplane 0.1 QUIET)\n"
    << "if(NOT Backplane_FOUND)\n"
    << "  find_program(_python NAMES python3 python)\n"
    << "  execute_process(COMMAND \"${_python}\" -c \"import backplane; print(backplane.cmake_prefix_path)\"\n"
    << "                  OUTPUT_VARIABLE _prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)\n"
    << "  find_package(Backplane 0.1 REQUIRED HINTS \"${_prefix}\")\n"
    << "endif()\n\n"
    << "# A wheel (pip install .) carries the plugin in its Python package's directory.\n"
    << "if(SKBUILD)\n  set(BACKPLANE_INSTALL_PLUGIN_DIR .)\nendif()\n\n";
  std::string link = key == "CUDA" ? " LINK backplane::torch_cuda" : "";
  std::string python;
  if (device) {
    s << "set(CMAKE_POSITION_INDEPENDENT_CODE ON)\nset(CMAKE_CXX_VISIBILITY_PRESET hidden)\n\n"
      << "# runtime/: the driver (emulated in host memory and threads); replace it with calls into yours.\n"
      << "add_library(backplane_" << name << "_runtime STATIC runtime/device.cpp runtime/memory.cpp runtime/stream.cpp)\n"
      << "target_include_directories(backplane_" << name << "_runtime PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})\n"
      << "find_package(Threads REQUIRED)\n"
      << "target_link_libraries(backplane_" << name << "_runtime PUBLIC Threads::Threads)\n"
      << "# The device layer: allocator, guard, streams, hooks, the minimal aten set and CPU fallback.\n"
      << "file(GLOB device_layer CONFIGURE_DEPENDS *.cpp aten/*.cpp)\n\n"
      << "# torch." << name << ": the plugin's Python side, named by its manifest (imported by name from a wheel).\n"
      << "if(SKBUILD)\n  set(python PYTHON_MODULE backplane_" << name << ")\nelse()\n"
      << "  set(python PYTHON_MODULE backplane_" << name << " PYTHON_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/python)\n"
      << "endif()\n\n";
    link = " LINK backplane_" + name + "_runtime";
    python = " ${python}";
  }
  s << "# One file per op in kernels/; adding one needs nothing here.\n"
    << "file(GLOB kernels CONFIGURE_DEPENDS kernels/*.cpp" << (key == "CUDA" ? " kernels/*.cu" : "") << ")\n"
    << "# Ops of your own: ops.yaml, a registry fragment with a namespace of yours (README.md).\n"
    << "if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/ops.yaml)\n  set(own_ops REGISTRY ops.yaml)\nendif()\n"
    << "backplane_add_plugin(" << name << " DISPATCH_KEY " << key << " SOURCES " << (device ? "${device_layer} " : "")
    << "${kernels}" << link << python << " ${own_ops})\n\n"
    << "# The conformance suite (every op against its PyTorch reference) on this backend alone.\n"
    << "enable_testing()\n"
    << "add_test(NAME conformance COMMAND $<TARGET_FILE:Backplane::cli> check --backends " << name
    << " --plugin-path ${CMAKE_BINARY_DIR}/lib)\n";
  return s.str();
}

std::string readme(const std::string& name, const std::string& key) {
  std::ostringstream s;
  s << "# " << name << ": a Backplane backend (" << key << ")\n\n"
    << "Written by `backplane new-backend " << name << " --dispatch-key " << key << "`. Every registry op has a\n"
    << "file in `kernels/` with its C++ signature; none is registered yet, so the backend starts\n"
    << "with every op \"not implemented\".\n\n"
    << "## Build, load, check\n\n"
    << "```sh\n"
    << "cmake -S . -B build -DCMAKE_PREFIX_PATH=<where Backplane is installed>   # or the wheel: nothing\n"
    << "cmake --build build\n"
    << "backplane check " << name << " --plugin-path build/lib     # one line per op\n"
    << "ctest --test-dir build                                  # the same, as a test\n"
    << "```\n\n"
    << "From Python: `BACKPLANE_PLUGIN_PATH=build/lib python -c \"import backplane; backplane.load('" << name
    << "')\"`.\n\n"
    << (key == "PrivateUse1"
            ? "This is a running device from the start: `runtime/` is an emulated driver (host memory and\n"
              "threads, asynchronous streams), and the device layer above it (allocator, guard, streams,\n"
              "events, hooks, copies, CPU fallback, `torch." + name + "` in `python/backplane_" + name + "`) is\n"
              "Backplane's npu device, renamed. `tests/test_device.py` checks it. Replace `runtime/` with\n"
              "calls into your driver (Backplane's docs/adding-a-device.md walks through each file), then\n"
              "write kernels.\n\n"
            : "")
    << "## Implement an op\n\n"
    << "Open `kernels/<op>.cpp`, write the compute, uncomment the `BACKPLANE_KERNEL` line at its\n"
    << "foot, rebuild, and run `backplane check " << name << " --ops <op> --plugin-path build/lib`.\n"
    << "`tests/test_" << name << ".py` runs the same suite and `torch.library.opcheck` from Python.\n"
    << "Where another plugin serves the same device (cpu does on CPU), choose per op:\n"
    << "`backplane.prefer(\"add\", \"" << name << "\")` or `BACKPLANE_PREFER=add:" << name << "`.\n\n"
    << "## Ops of your own\n\n"
    << "Write `ops.yaml` beside this README: the registry's grammar with a namespace of yours,\n\n"
    << "```yaml\nnamespace: " << name << "\nops:\n  - schema: fused_gelu(Tensor x) -> Tensor\n"
    << "    doc: GELU in one pass.\n    dtypes: [float32, bfloat16]\n    shape: {same_as: x}\n"
    << "    reference: aten::gelu(x)\n```\n\n"
    << "and `kernels/fused_gelu.cpp` ending in `BACKPLANE_NS_KERNEL(" << name << ", " << key
    << ", fused_gelu, fn)`; rebuild. The op is `torch.ops." << name << ".fused_gelu`, with a Meta kernel,\n"
    << "autograd from `backward:`, conformance (`backplane check " << name << " --ops " << name
    << "::fused_gelu`) and bench rows,\nlike the core's ops (Backplane's docs/vendor-ops.md).\n\n"
    << "## Ship it as a wheel\n\n"
    << "`pip install --no-build-isolation .` (needs scikit-build-core and the backplane wheel) installs\n"
    << "package `backplane_" << name << "` holding the plugin and its manifest, and declares it in the\n"
    << "`backplane.plugins` entry-point group: `backplane.load('" << name << "')` and `backplane list` then\n"
    << "find it by name, with no path given.\n";
  return s.str();
}

std::string pyproject(const std::string& name) {
  std::ostringstream s;
  s << "[build-system]\nrequires = [\"scikit-build-core>=0.10\"]\nbuild-backend = \"scikit_build_core.build\"\n\n"
    << "[project]\nname = \"backplane-" << name << "\"\nversion = \"0.1.0\"\n"
    << "description = \"The " << name << " backend for Backplane\"\nrequires-python = \">=3.9\"\n\n"
    << "# backplane.load('" << name << "') finds the plugin in this package's directory.\n"
    << "[project.entry-points.\"backplane.plugins\"]\n" << name << " = \"backplane_" << name << "\"\n\n"
    << "[tool.scikit-build]\nwheel.install-dir = \"backplane_" << name << "\"\n"
    << "wheel.packages = [\"python/backplane_" << name << "\"]\n";
  return s.str();
}

std::string python_test(const std::string& name) {
  std::ostringstream s;
  s << "\"\"\"The conformance suite and torch.library.opcheck on the " << name << " backend's implemented ops.\n"
    << "Run: BACKPLANE_PLUGIN_PATH=build/lib python -m pytest tests\"\"\"\n"
    << "import pytest\nimport torch\n\nimport backplane\n\n"
    << "BACKEND = backplane.load(\"" << name << "\")[0]\n\n\n"
    << "@pytest.mark.parametrize(\"op\", [op.name for op in backplane.ops()])\n"
    << "def test_conformance(op):\n"
    << "    results = backplane.check(\"" << name << "\", [op])\n"
    << "    if [r.outcome for r in results] == [\"not implemented\"]:\n"
    << "        pytest.skip(results[0].detail)\n"
    << "    failed = [r for r in results if r.outcome not in (\"passed\", \"skipped\")]\n"
    << "    assert not failed, failed[:3]\n\n\n"
    << "@pytest.mark.parametrize(\"op\", [op for op in backplane.ops() if op.name in BACKEND.ops], ids=str)\n"
    << "def test_opcheck(op):\n"
    << "    device = {\"CPU\": \"cpu\", \"CUDA\": \"cuda\"}.get(BACKEND.dispatch_key) or torch._C._get_privateuse1_backend_name()\n"
    << "    with backplane.prefer(op.name, \"" << name << "\"):\n"
    << "        for sample in op.samples[:3]:\n"
    << "            schema = backplane.torch_op(op.name).default._schema\n"
    << "            args, kwargs = [], {}\n"
    << "            for arg in schema.arguments:\n"
    << "                if arg.name not in sample[\"args\"]:\n"
    << "                    continue\n"
    << "                value = sample[\"args\"][arg.name]\n"
    << "                if arg.name in op.tensor_args:\n"
    << "                    value = torch.randn(value, device=device)\n"
    << "                (kwargs.__setitem__(arg.name, value) if arg.kwarg_only else args.append(value))\n"
    << "            torch.library.opcheck(backplane.torch_op(op.name).default, tuple(args), kwargs)\n";
  return s.str();
}

// Why `name` cannot name a new backend, or empty. A PyTorch device type's name (as torch
// parses one: xpu, meta, privateuseone, ...) cannot name a PrivateUse1 device: torch
// refuses some when the plugin loads (a backtrace) and parses the others as its own
// device; for any key it would read as that device. An in-tree backend's would shadow it.
std::string reserved_name(const std::string& name) {
  if (name == "cpu" || name == "cuda" || name == "npu") return "the name of an in-tree Backplane backend";
  try {
    (void)c10::Device(name);
    return "the name of a PyTorch device type (torch.device('" + name + "'))";
  } catch (const c10::Error&) {
    return "";  // not a device type torch knows
  }
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int new_backend_command(const Options& options) {
  std::string name, key, dir;
  for (size_t i = 0; i < options.rest.size(); ++i) {
    const std::string& arg = options.rest[i];
    if (arg == "--dispatch-key" && i + 1 < options.rest.size()) key = options.rest[++i];
    else if (arg == "--dir" && i + 1 < options.rest.size()) dir = options.rest[++i];
    else if (name.empty()) name = arg;
    else {
      std::cerr << "backplane new-backend: unexpected argument '" << arg << "'\n";
      return kExitUsage;
    }
  }
  if (name.empty() || key.empty()) {
    std::cerr << "backplane new-backend: usage: backplane new-backend NAME --dispatch-key {CPU,CUDA,PrivateUse1} [--dir DIR]\n";
    return kExitUsage;
  }
  if (!is_valid_backend_name(name)) {
    std::cerr << "backplane new-backend: invalid backend name '" << name
              << "': expected a plain identifier ([A-Za-z_][A-Za-z0-9_]*) other than 'core'\n";
    return kExitUsage;
  }
  if (const std::string why = reserved_name(name); !why.empty()) {
    std::cerr << "backplane new-backend: '" << name << "' is " << why << "; choose another name\n";
    return kExitUsage;
  }
  if (key != "CPU" && key != "CUDA" && key != "PrivateUse1") {
    std::cerr << "backplane new-backend: --dispatch-key '" << key << "': expected CPU, CUDA or PrivateUse1\n";
    return kExitUsage;
  }
  std::optional<fs::path> device_template;
  if (key == "PrivateUse1") {
    device_template = privateuse1_template();
    if (!device_template) {
      std::cerr << "backplane new-backend: the PrivateUse1 template (share/backplane/templates/PrivateUse1) was not "
                   "found beside this command; reinstall Backplane\n";
      return kExitFailed;
    }
    // The name becomes a torch device type ("acme:0"), which torch parses as letters and '_'.
    for (char c : name)
      if (!lower(c) && c != '_') {
        std::cerr << "backplane new-backend: a PrivateUse1 backend's name is also its torch device type, which "
                     "takes lowercase letters and '_' only; found '" << name << "'\n";
        return kExitUsage;
      }
  }
  const fs::path root = dir.empty() ? fs::path(name) : fs::path(dir);
  if (fs::exists(root) && !fs::is_empty(root)) {
    std::cerr << "backplane new-backend: " << root.string() << " exists and is not empty; choose another --dir\n";
    return kExitFailed;
  }
  size_t files = 0;
  auto emit = [&](const fs::path& rel, const std::string& text) {
    write(root / rel, text);
    ++files;
  };
  emit("CMakeLists.txt", cmake_lists(name, key));
  emit("README.md", readme(name, key));
  emit("pyproject.toml", pyproject(name));
  if (device_template) {
    // The device layer, renamed; the template's kernels are replaced by the stubs below.
    for (const auto& entry : fs::recursive_directory_iterator(*device_template)) {
      if (!entry.is_regular_file()) continue;
      const std::string rel = fs::relative(entry.path(), *device_template).generic_string();
      if (rel.rfind("kernels/", 0) == 0 || rel == "CMakeLists.txt" || rel == "README.md" ||
          rel.find("__pycache__") != std::string::npos)
        continue;
      emit(rename_device(rel, name), rename_device(read_file(entry.path()), name));
    }
  } else {
    emit(fs::path("python") / ("backplane_" + name) / "__init__.py",
         "\"\"\"The " + name + " Backplane backend: libbackplane_" + name +
             ".so and its manifest sit in this package's directory.\"\"\"\n");
  }
  emit(fs::path("tests") / ("test_" + name + ".py"), python_test(name));
  for (const OpDef& op : registry().ops()) emit(fs::path("kernels") / (op.name + ".cpp"), kernel_stub(op, name, key));
  std::cout << "wrote " << files << " files to " << root.string() << "/ (" << registry().ops().size()
            << " kernel stubs, none registered yet)\nnext:\n  cmake -S " << root.string() << " -B "
            << (root / "build").string() << " && cmake --build " << (root / "build").string()
            << "\n  backplane check " << name << " --plugin-path " << (root / "build" / "lib").string() << "\n";
  return kExitOk;
}

}  // namespace backplane::cli
