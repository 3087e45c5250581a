// `backplane new-backend NAME --dispatch-key KEY [--stable-abi [--torch-target X.Y]] [--dir DIR]`:
// writes a self-contained plugin project that builds against an installed Backplane
// (find_package(Backplane)), out of this repository: CMakeLists.txt, one kernel file per
// registry op (a stub with the op's C++ signature, unregistered, so the backend starts with
// every op "not implemented"), a README, a conformance test and a pyproject.toml for its
// own wheel. With --stable-abi (CPU or CUDA) the kernels are written against PyTorch's
// stable ABI (backplane/plugin/stable_kernel.h, from templates/new-backend/stable): mul is
// implemented as the worked example, and the plugin runs under torch X.Y and later.
// For PrivateUse1 it also writes a running device: the files of the npu plugin that
// backends/npu/new-backend-files.txt lists (emulated driver, allocator, guard, streams,
// hooks, copies, CPU fallback, device module and its device-level tests), renamed, from
// the template that ships with Backplane (share/backplane/templates/PrivateUse1: those
// files and the list). An npu file the list does not name never reaches a vendor. The other
// files are written from cli/templates/new-backend (share/backplane/templates/new-backend):
// each @KEY@ placeholder is replaced by its value, in one pass.
// `--without PART[,PART]` (PrivateUse1, repeatable) leaves optional parts of the device out
// (compile, profiler, collectives: the [PART] sections of that list, device_parts.h), and
// the scaffold's python/backplane_NAME/_parts.py lists the parts it kept.
// `backplane new-backend NAME --triton [--dir DIR]` writes a plugin of kind triton instead:
// a Python package (templates/new-backend/triton), see write_triton_project.
#include "cli.h"
#include "commands/device_parts.h"
#include "commands/scaffold_kernel_file.h"
#include "commands/scaffold_text.h"

#include <backplane/plugin_abi.h>
#include <backplane/registry.h>

#include <c10/core/Device.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

// The source tree's templates, for a command run from its build directory (cli/CMakeLists.txt).
#ifndef BACKPLANE_NPU_SOURCE_DIR
#define BACKPLANE_NPU_SOURCE_DIR nullptr
#endif
#ifndef BACKPLANE_NEW_BACKEND_SOURCE_DIR
#define BACKPLANE_NEW_BACKEND_SOURCE_DIR nullptr
#endif

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

// The device template's list of files to copy, with its optional parts (device_parts.h).
constexpr const char* kDeviceFileList = "new-backend-files.txt";

// "2.13" as (2, 13); nullopt unless it reads major.minor.
std::optional<std::pair<int, int>> parse_major_minor(const std::string& text) {
  int major = 0, minor = 0;
  char rest = 0;
  if (std::sscanf(text.c_str(), "%d.%d%c", &major, &minor, &rest) != 2 || major < 0 || minor < 0) return std::nullopt;
  return std::make_pair(major, minor);
}

// Why `name` cannot name a new backend, or empty. A PyTorch device type's name (as torch
// parses one: xpu, meta, privateuseone, ...) cannot name a PrivateUse1 device: torch
// refuses some when the plugin loads (a backtrace) and parses the others as its own
// device; for any key it would read as that device. An in-tree backend's would shadow it.
std::string reserved_name(const std::string& name) {
  if (name == "cpu" || name == "cuda" || name == "npu" || name == "triton")
    return "the name of an in-tree Backplane backend";
  try {
    (void)c10::Device(name);
    return "the name of a PyTorch device type (torch.device('" + name + "'))";
  } catch (const c10::Error&) {
    return "";  // not a device type torch knows
  }
}

// The CMake prefix this command belongs to (bin/.. holding lib/cmake/Backplane: an install,
// or the wheel's package), for the "next:" lines; nullopt for a command run from a build
// directory, whose BackplaneConfig.cmake is for the install only.
std::optional<fs::path> own_prefix() {
  const auto dir = command_dir();
  if (!dir) return std::nullopt;
  std::error_code ec;
  const fs::path prefix = fs::weakly_canonical(*dir / "..", ec);
  if (ec || !fs::is_regular_file(prefix / "lib" / "cmake" / "Backplane" / "BackplaneConfig.cmake", ec))
    return std::nullopt;
  return prefix;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// A schema name as a Python identifier: a keyword gets a trailing '_'.
std::string py_name(const std::string& name) {
  static const char* const keywords[] = {"False", "None", "True", "and", "as", "assert", "async", "await", "break",
                                         "class", "continue", "def", "del", "elif", "else", "except", "finally",
                                         "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
                                         "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"};
  for (const char* k : keywords)
    if (name == k) return name + "_";
  return name;
}

// The Triton project: NAME/ (kernels(), the manifest and its writer), one kernels/OP.py per
// registry op (add implemented, the others unregistered stubs), pyproject.toml, README,
// tests. The manifest lists add only: what the registered launchers are at the start,
// which `python -m NAME.manifest` keeps it equal to afterwards (the scaffold's README).
size_t write_triton_project(const fs::path& templates, const fs::path& root, const std::string& name) {
  const fs::path t = templates / "triton";
  size_t files = 0;
  auto emit = [&](const fs::path& rel, const std::string& text) {
    write(root / rel, text);
    ++files;
  };
  // Triton: the in-tree plugin's tried range (backends/triton); torch: this Backplane's,
  // the one the scaffold's example was checked under, as the floor.
  const Values values = {{"NAME", name}, {"TRITON_RANGE", ">=3.6,<4"}, {"TORCH_RANGE", ">=" + torch_major_minor()}};
  const fs::path package = name;
  emit("pyproject.toml", from_template(t, "pyproject.toml.in", values));
  emit("README.md", from_template(t, "README.md.in", values));
  emit(package / "__init__.py", from_template(t, "package_init.py.in", values));
  emit(package / "_registry.py", from_template(t, "registry.py.in", values));
  emit(package / "manifest.py", from_template(t, "manifest.py.in", values));
  emit(package / ("libbackplane_" + name + ".manifest.yaml"), from_template(t, "manifest.yaml.in", values));
  emit(package / "kernels" / "__init__.py", from_template(t, "kernels_init.py.in", values));
  emit(fs::path("tests") / ("test_" + name + ".py"), from_template(t, "test_plugin.py.in", values));
  for (const OpDef& op : registry().ops()) {
    Values v = values;
    v["OP"] = py_name(op.name);
    v["SCHEMA"] = op.schema;
    v["DOC"] = op.doc;
    // The bridge's call: the outputs the core allocated first, then every argument.
    std::string params;
    if (!op.writes())
      for (size_t k = 0; k < op.new_outputs(); ++k)
        params += (params.empty() ? "" : ", ") + std::string("out") + (op.new_outputs() == 1 ? "" : std::to_string(k));
    for (const c10::Argument& arg : op.arguments) params += (params.empty() ? "" : ", ") + py_name(arg.name());
    v["PARAMS"] = params;
    v["CALL_NOTE"] = op.writes() ? ": it writes its Tensor(a!) argument in place"
                     : op.new_outputs() == 1 ? ", `out` allocated by the core with the result's sizes"
                                             : ", the outputs allocated by the core with their sizes";
    const bool example = op.name == "add";
    emit(fs::path(package) / "kernels" / (op.name + ".py"),
         from_template(t, example ? "add.py.in" : "kernel.py.in", v));
  }
  return files;
}

}  // namespace

int new_backend_command(const Options& options) {
  std::string name, key, dir, torch_target;
  std::vector<std::string> without;  // --without values, each a part or a comma list
  bool stable = false, triton = false;
  for (size_t i = 0; i < options.rest.size(); ++i) {
    const std::string& arg = options.rest[i];
    if (arg == "--dispatch-key" && i + 1 < options.rest.size()) key = options.rest[++i];
    else if (arg == "--dir" && i + 1 < options.rest.size()) dir = options.rest[++i];
    else if (arg == "--stable-abi") stable = true;
    else if (arg == "--triton") triton = true;
    else if (arg == "--torch-target" && i + 1 < options.rest.size()) torch_target = options.rest[++i];
    else if (arg == "--without" && i + 1 < options.rest.size()) without.push_back(options.rest[++i]);
    else if (name.empty()) name = arg;
    else {
      std::cerr << "backplane new-backend: unexpected argument '" << arg << "'\n";
      return kExitUsage;
    }
  }
  if (triton && (!key.empty() || stable || !torch_target.empty() || !without.empty())) {
    std::cerr << "backplane new-backend: --triton writes a Python package of Triton kernels, which serve CUDA (and "
                 "the CPU under TRITON_INTERPRET=1) whatever the torch ABI; it takes no "
              << (!key.empty()            ? "--dispatch-key"
                  : stable                  ? "--stable-abi"
                  : !torch_target.empty()   ? "--torch-target"
                                            : "--without")
              << "\n";
    return kExitUsage;
  }
  if (name.empty() || (key.empty() && !triton)) {
    std::cerr << "backplane new-backend: usage: backplane new-backend NAME --dispatch-key {CPU,CUDA,PrivateUse1} "
                 "[--stable-abi [--torch-target X.Y]] [--without PART[,PART]] [--dir DIR]\n"
                 "       backplane new-backend NAME --triton [--dir DIR]   (a Python package of Triton kernels)\n";
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
  // The triton project's package is NAME: it must not shadow what it imports, nor be a keyword.
  if (triton && (name == "torch" || name == "backplane" || py_name(name) != name)) {
    std::cerr << "backplane new-backend: --triton names its Python package '" << name
              << "', which would shadow a module it needs or is a Python keyword; choose another name\n";
    return kExitUsage;
  }
  if (!triton && key != "CPU" && key != "CUDA" && key != "PrivateUse1") {
    std::cerr << "backplane new-backend: --dispatch-key '" << key << "': expected CPU, CUDA or PrivateUse1\n";
    return kExitUsage;
  }
  if (!without.empty() && key != "PrivateUse1") {
    std::cerr << "backplane new-backend: --without leaves optional parts out of a PrivateUse1 device (its template "
                 "list's [PART] sections); --dispatch-key "
              << key << " writes no device, so there is nothing to leave out\n";
    return kExitUsage;
  }
  const std::string here = torch_major_minor();
  if (stable && key == "PrivateUse1") {
    std::cerr << "backplane new-backend: --stable-abi serves CPU or CUDA kernels; a PrivateUse1 device's runtime "
                 "(guard, allocator, hooks) needs the full ABI, which PyTorch's stable ABI does not cover\n";
    return kExitUsage;
  }
  if (!torch_target.empty() && !stable) {
    std::cerr << "backplane new-backend: --torch-target needs --stable-abi (a full-ABI plugin runs under the torch "
                 "it is built with only)\n";
    return kExitUsage;
  }
  if (stable && torch_target.empty()) torch_target = here;
  if (stable) {
    const auto target = parse_major_minor(torch_target), running = parse_major_minor(here);
    if (!target) {
      std::cerr << "backplane new-backend: --torch-target '" << torch_target << "': expected major.minor, such as 2.13\n";
      return kExitUsage;
    }
    if (running && *target > *running) {
      std::cerr << "backplane new-backend: --torch-target " << torch_target << " is later than this Backplane's torch "
                << here << ": the plugin would not load under it\n";
      return kExitUsage;
    }
  }
  const std::optional<fs::path> templates =
      find_template("new-backend", BACKPLANE_NEW_BACKEND_SOURCE_DIR, "kernel.cpp.in");
  if (!templates) {
    std::cerr << "backplane new-backend: the templates (share/backplane/templates/new-backend) were not found "
                 "beside this command; reinstall Backplane\n";
    return kExitFailed;
  }
  std::optional<fs::path> device_template;
  DeviceFileList device_files;
  std::set<std::string> left_out;
  if (key == "PrivateUse1") {
    device_template = find_template("PrivateUse1", BACKPLANE_NPU_SOURCE_DIR, kDeviceFileList);
    if (!device_template) {
      std::cerr << "backplane new-backend: the PrivateUse1 template (share/backplane/templates/PrivateUse1) was not "
                   "found beside this command; reinstall Backplane\n";
      return kExitFailed;
    }
    // The name becomes a torch device type ("acme:0"), which torch parses as letters and '_'.
    for (char c : name)
      if (!std::islower(static_cast<unsigned char>(c)) && c != '_') {
        std::cerr << "backplane new-backend: a PrivateUse1 backend's name is also its torch device type, which "
                     "takes lowercase letters and '_' only; found '" << name << "'\n";
        return kExitUsage;
      }
    device_files = parse_device_file_list(read_file(*device_template / kDeviceFileList));
    try {
      left_out = parts_left_out(device_files, without);
    } catch (const std::invalid_argument& e) {
      std::cerr << "backplane new-backend: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  const fs::path root = dir.empty() ? fs::path(name) : fs::path(dir);
  if (fs::exists(root) && !fs::is_empty(root)) {
    std::cerr << "backplane new-backend: " << root.string() << " exists and is not empty; choose another --dir\n";
    return kExitFailed;
  }
  if (triton) {
    const size_t files = write_triton_project(*templates, root, name);
    std::cout << "wrote " << files << " files to " << root.string() << "/ (a triton plugin: add implemented as the "
              << "worked example, " << registry().ops().size() - 1 << " ops stubbed, not registered)\nnext:\n  cd "
              << root.string() << " && PYTHONPATH=$PWD BACKPLANE_PLUGIN_PATH=$PWD/" << name
              << " TRITON_INTERPRET=1 backplane check " << name << "\n";
    return kExitOk;
  }
  size_t files = 0;
  auto emit = [&](const fs::path& rel, const std::string& text) {
    write(root / rel, text);
    ++files;
  };
  Values values = {{"NAME", name}, {"KEY", key}, {"TORCH_TARGET", torch_target}};
  Values readme = values;
  const std::vector<std::string> kept = parts_kept(device_files, left_out);
  std::vector<std::string> left;  // in the list's order
  for (const DevicePart& part : device_files.parts)
    if (left_out.count(part.name)) left.push_back(part.name);
  if (device_template) {
    Values device = values;
    device["COLLECTIVES_NOTE"] =
        left_out.count("collectives") ? "" : from_template(*templates, "PrivateUse1/README-collectives.md.in", values);
    device["PARTS_LEFT_OUT"] = left.empty() ? "none" : join(left);
    device["PARTS_KNOWN"] = join(parts_kept(device_files, {}));
    readme["DEVICE_NOTE"] = from_template(*templates, "PrivateUse1/README-device.md.in", device);
  } else {
    readme["DEVICE_NOTE"] = "";
  }
  readme["ABI_NOTE"] = stable ? from_template(*templates, "stable/README-stable.md.in", values) : "";
  readme["FLAGS"] = stable ? " --stable-abi --torch-target " + torch_target : "";
  readme["REGISTERED"] = stable ? std::string("mul is implemented, as the worked example of a stable-ABI kernel; the others "
                                              "are not registered yet, so they start \"not implemented\"")
                                : "none is registered yet, so the backend starts with every op \"not implemented\"";
  readme["REGISTER_MACRO"] = stable ? "BACKPLANE_STABLE_KERNEL" : "BACKPLANE_KERNEL";
  readme["REGISTER_MACRO_NS"] = stable ? "BACKPLANE_STABLE_NS_KERNEL" : "BACKPLANE_NS_KERNEL";
  readme["WHEEL_RULE"] = stable ? "`torch>=" + torch_target + "`, from `torch-target`, and a Backplane that loads stable plugins"
                                : "`torch==X.Y.*`, the minor version it was built against, and the Backplane minor "
                                  "version it links (`backplane==X.Y.*`)";
  readme["WHEEL_EXCLUDE_CUDA"] = key == "CUDA" ? " --exclude 'libcudart.so*'" : "";
  Values project = values;
  project["ABI"] = stable ? "stable" : "full";
  project["ABI_RULE"] = stable ? "torch>=" + torch_target + ", the torch-target below"
                               : "torch==<the torch it is built against>.*";
  project["TORCH_TARGET_SETTING"] = stable ? "torch-target = \"" + torch_target + "\"\n" : "";
  emit("CMakeLists.txt", from_template(*templates, (stable ? "stable/" : "") + key + "/CMakeLists.txt.in", values));
  emit("README.md", from_template(*templates, "README.md.in", readme));
  emit("pyproject.toml", from_template(*templates, "pyproject.toml.in", project));
  if (device_template) {
    // The listed device files of the parts kept, renamed; kernels come from the stubs below.
    for (const std::string& rel : files_to_copy(device_files, left_out)) {
      if (!fs::is_regular_file(*device_template / rel))
        throw std::runtime_error("the template " + (*device_template / rel).string() + " is missing; reinstall Backplane");
      emit(rename_device(rel, name), rename_device(read_file(*device_template / rel), name));
    }
    Values parts = values;
    parts["PARTS"] = python_tuple(kept);
    emit(fs::path("python") / ("backplane_" + name) / "_parts.py",
         from_template(*templates, "PrivateUse1/parts.py.in", parts));
  } else {
    emit(fs::path("python") / ("backplane_" + name) / "__init__.py", from_template(*templates, "package_init.py.in", values));
  }
  emit(fs::path("tests") / ("test_" + name + ".py"), from_template(*templates, "test_backend.py.in", values));
  for (const OpDef& op : registry().ops()) {
    const KernelFile kernel = kernel_file(*templates, op, values, stable);
    emit(kernel.rel, kernel.text);
  }
  const std::string kernels = stable ? "mul implemented as the worked example, the other ops stubbed, on the stable ABI "
                                       "for torch " + torch_target + " and later"
                                     : std::to_string(registry().ops().size()) + " kernel stubs, none registered yet";
  // The commands as they run here: find_package(Backplane) needs this command's prefix (a
  // wheel's is found without it, but naming it is as true), and the check is this command.
  const std::optional<fs::path> prefix = own_prefix();
  const std::string self = prefix ? (*prefix / "bin" / "backplane").string() : "backplane";
  const std::string parts_note = left.empty() ? "" : "; without " + join(left);
  std::cout << "wrote " << files << " files to " << root.string() << "/ (" << kernels << parts_note
            << ")\nnext:\n  cmake -S "
            << root.string() << " -B " << (root / "build").string() << " -DCMAKE_PREFIX_PATH="
            << (prefix ? prefix->string() : "<Backplane prefix>") << " && cmake --build " << (root / "build").string()
            << "\n  " << self << " check " << name << " --plugin-path " << (root / "build" / "lib").string() << "\n";
  // A prefix install's Python side (cmake/BackplaneInstall.cmake): the scaffold's tests import
  // backplane from it (a wheel's is on sys.path already).
  if (prefix && fs::is_directory(*prefix / "lib" / "python" / "backplane"))
    std::cout << "  PYTHONPATH=" << (*prefix / "lib" / "python").string() << " BACKPLANE_PLUGIN_PATH="
              << (root / "build" / "lib").string() << " python -m pytest " << (root / "tests").string() << "\n";
  if (!prefix)
    std::cout << "  (this backplane runs from a build directory: `cmake --install "
              << (command_dir() ? fs::weakly_canonical(*command_dir() / "..").string() : "<build>")
              << " --prefix P` first, and pass P)\n";
  return kExitOk;
}

}  // namespace backplane::cli
