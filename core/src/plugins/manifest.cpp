#include "plugins/manifest.h"
#include "plugins/version_range.h"
#include <backplane/plugin_abi.h>

#include "util/posix_files.h"
#include "registry/yaml_strict.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <utility>
#include <set>
#include <sstream>
#include <stdexcept>

namespace backplane {
namespace {

[[noreturn]] void fail(const std::string& path, const YAML::Node& node, const std::string& message) {
  const YAML::Mark mark = node.Mark();
  std::string where = path;
  if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  throw std::runtime_error("bad manifest " + where + ": " + message);
}

template <typename T>
T field(const std::string& path, const YAML::Node& root, const char* key, const char* expected) {
  const YAML::Node node = root[key];
  if (!node) fail(path, root, std::string("missing key '") + key + "' (" + expected + ")");
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(path, node, std::string("key '") + key + "' should be " + expected);
  }
}

}  // namespace

std::optional<std::pair<int, int>> major_minor(const std::string& version) {
  const auto dot = version.find('.');
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (dot == std::string::npos || !digits(version.substr(0, dot)) || !digits(version.substr(dot + 1)))
    return std::nullopt;
  return std::make_pair(std::stoi(version.substr(0, dot)), std::stoi(version.substr(dot + 1)));
}

namespace {

// python_module and python_path, where given (both kinds).
void read_python_side(const std::string& path, const YAML::Node& root, Manifest& m) {
  if (root["python_module"]) {
    m.python_module = field<std::string>(path, root, "python_module", "a Python module name");
    bool dotted = !m.python_module.empty() && m.python_module.front() != '.' && m.python_module.back() != '.';
    for (size_t i = 0; i < m.python_module.size() && dotted; ++i) {
      const char c = m.python_module[i];
      dotted = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
               (c == '.' && m.python_module[i + 1] != '.');
    }
    if (!dotted || std::isdigit(static_cast<unsigned char>(m.python_module[0])))
      fail(path, root["python_module"], "key 'python_module' should be a dotted Python module name such as "
                                        "backplane_acme, found '" + m.python_module + "'");
    // Absent: the module is importable by name (a plugin wheel's own package).
    m.python_path = root["python_path"] ? field<std::string>(path, root, "python_path", "a directory") : "";
    // Relative and inside the plugin's directory: a manifest must not point Python at
    // arbitrary places on the machine.
    if (root["python_path"] &&
        (m.python_path.empty() || m.python_path[0] == '/' || m.python_path.find("..") != std::string::npos))
      fail(path, root["python_path"], "key 'python_path' should be a directory relative to the manifest, without '..'; "
                                      "found '" + m.python_path + "'");
  } else if (root["python_path"]) {
    fail(path, root["python_path"], "key 'python_path' needs 'python_module'");
  }
}

// registry, where given (both kinds): the plugin's own ops (vendor_ops.h), a fragment
// relative to the manifest's directory, found there by either kind's loader.
void read_registry(const std::string& path, const YAML::Node& root, Manifest& m) {
  if (!root["registry"]) return;
  m.registry = field<std::string>(path, root, "registry", "a registry fragment file");
  if (m.registry.empty() || m.registry[0] == '/' || m.registry.find("..") != std::string::npos)
    fail(path, root["registry"], "key 'registry' should be a file relative to the manifest, without '..'; found '" +
                                     m.registry + "'");
}

std::string range_field(const std::string& path, const YAML::Node& root, const char* key) {
  const std::string range = field<std::string>(path, root, key, "a version range such as \">=2.11,<3\"");
  if (auto why = version_range_error(range)) fail(path, root[key], std::string("key '") + key + "': " + *why);
  return range;
}

// kind: triton (manifest.h): its own keys, and none of a library's.
void read_triton_manifest(const std::string& path, const YAML::Node& root, Manifest& m) {
  static const std::set<std::string> known = {"backplane_plugin_abi", "name", "version", "kind", "dispatch_key",
                                              "ops", "python_module", "python_path", "triton", "torch",
                                              "registry"};
  if (auto problem = detail::find_unknown_key(root, known, "triton manifest"))
    fail(path, problem->node, problem->message);
  if (m.dispatch_key != "CUDA")
    fail(path, root["dispatch_key"], "a plugin of kind triton serves dispatch key CUDA (what Triton compiles for "
                                     "here), found '" + m.dispatch_key + "'");
  if (!root["python_module"]) fail(path, root, "missing key 'python_module' (the package whose kernels() gives its "
                                               "launchers: a plugin of kind triton has no library)");
  read_python_side(path, root, m);
  read_registry(path, root, m);
  m.triton_versions = range_field(path, root, "triton");
  m.torch_versions = range_field(path, root, "torch");
  m.cxx11_abi = cxx11_abi();  // nothing of C++ crosses: Python objects only
}

}  // namespace

Manifest read_manifest(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = detail::read_regular_file(path, why);
  if (!text) throw std::runtime_error("cannot read manifest " + path + ": " + why);
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::ParserException& e) {
    throw std::runtime_error("bad manifest " + path + ":" + std::to_string(e.mark.line + 1) + ":" +
                             std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) fail(path, root, "expected a mapping of plugin facts");
  // A repeated key would be read once and the other value dropped; an unknown key is
  // a misspelling or a manifest for another core, never something to skip.
  if (auto problem = detail::find_duplicate_key(root)) fail(path, problem->node, problem->message);
  Manifest m;
  if (root["kind"]) {
    m.kind = field<std::string>(path, root, "kind", "shared_library or triton");
    if (m.kind != "shared_library" && m.kind != "triton")
      fail(path, root["kind"], "key 'kind' should be shared_library or triton, found '" + m.kind + "'");
  }
  m.plugin_abi = field<int>(path, root, "backplane_plugin_abi", "an integer");
  m.name = field<std::string>(path, root, "name", "the backend name");
  m.version = field<std::string>(path, root, "version", "a version string");
  m.dispatch_key = field<std::string>(path, root, "dispatch_key", "a dispatch key such as CPU");
  m.ops = field<std::vector<std::string>>(path, root, "ops", "a list of op names");
  if (m.kind == "triton") {
    read_triton_manifest(path, root, m);
    return m;
  }
  static const std::set<std::string> known = {"backplane_plugin_abi", "name", "version", "dispatch_key", "registration",
                                              "torch_version", "cxx11_abi", "ops", "python_module", "python_path",
                                              "registry", "torch_abi", "kind", "build_type"};
  if (auto problem = detail::find_unknown_key(root, known, "manifest")) fail(path, problem->node, problem->message);
  m.torch_version = field<std::string>(path, root, "torch_version", "torch major.minor such as \"2.14\"");
  if (!major_minor(m.torch_version))
    fail(path, root["torch_version"], "key 'torch_version' should be torch major.minor such as \"2.14\", found '" +
                                          m.torch_version + "'");
  if (root["torch_abi"]) {
    m.torch_abi = field<std::string>(path, root, "torch_abi", "full or stable");
    if (m.torch_abi != "full" && m.torch_abi != "stable")
      fail(path, root["torch_abi"], "key 'torch_abi' should be full or stable, found '" + m.torch_abi + "'");
  }
  m.cxx11_abi = field<bool>(path, root, "cxx11_abi", "true or false");
  if (root["registration"]) {
    m.registration = field<std::string>(path, root, "registration", "core or direct");
    if (m.registration != "core" && m.registration != "direct")
      fail(path, root["registration"], "key 'registration' should be core or direct, found '" + m.registration + "'");
  }
  read_python_side(path, root, m);
  if (root["build_type"]) m.build_type = field<std::string>(path, root, "build_type", "a CMake build type such as Release");
  read_registry(path, root, m);
  return m;
}

namespace {

std::string ops_list(const std::vector<std::string>& ops) {
  std::string out = "[";
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool qualified = ops[i].find(':') != std::string::npos;  // a vendor op: quoted for YAML
    out += (i ? ", " : "") + (qualified ? "\"" + ops[i] + "\"" : ops[i]);
  }
  return out + "]";
}

std::string triton_manifest_to_yaml(const Manifest& m) {
  std::ostringstream out;
  out << "# A plugin of kind triton: its kernels are Python launchers (docs/adding-a-backend.md).\n"
      << "backplane_plugin_abi: " << m.plugin_abi << "\n"
      << "name: " << m.name << "\n"
      << "version: \"" << m.version << "\"\n"
      << "kind: triton\n"
      << "dispatch_key: " << m.dispatch_key << "\n"
      << "python_module: " << m.python_module << "\n"
      << (m.python_path.empty() ? "" : "python_path: " + m.python_path + "\n")
      << "ops: " << ops_list(m.ops) << "\n"
      << (m.registry.empty() ? "" : "registry: " + m.registry + "\n")
      << "triton: \"" << m.triton_versions << "\"\n"
      << "torch: \"" << m.torch_versions << "\"\n";
  return out.str();
}

}  // namespace

std::string manifest_to_yaml(const Manifest& m) {
  if (m.kind == "triton") return triton_manifest_to_yaml(m);
  std::ostringstream out;
  out << "# Written by backplane_manifest at build time; read by the loader before dlopen.\n"
      << "backplane_plugin_abi: " << m.plugin_abi << "\n"
      << "name: " << m.name << "\n"
      << "version: \"" << m.version << "\"\n"
      << "dispatch_key: " << m.dispatch_key << "\n"
      << "torch_version: \"" << m.torch_version << "\"\n"
      << "cxx11_abi: " << (m.cxx11_abi ? "true" : "false") << "\n"
      << "registration: " << m.registration << "\n"
      << (m.torch_abi == "full" ? "" : "torch_abi: " + m.torch_abi + "\n")
      << "ops: " << ops_list(m.ops) << "\n";
  if (!m.python_module.empty()) out << "python_module: " << m.python_module << "\n";
  if (!m.python_path.empty()) out << "python_path: " << m.python_path << "\n";
  if (!m.registry.empty()) out << "registry: " << m.registry << "\n";
  if (!m.build_type.empty()) out << "build_type: " << m.build_type << "\n";
  return out.str();
}

std::optional<std::string> unoptimised_build_type(const std::string& build_type) {
  if (build_type.empty()) return std::nullopt;  // an older manifest: unknown, so no claim
  std::string lower = build_type;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "release" || lower == "relwithdebinfo" || lower == "minsizerel") return std::nullopt;
  if (lower == "none") return std::string("built with no CMAKE_BUILD_TYPE (no optimisation flags)");
  return "a " + build_type + " build";
}

std::optional<std::string> manifest_incompatibility(const Manifest& m, const std::string& expected_name) {
  if (m.name != expected_name)
    return "manifest names backend '" + m.name + "', expected '" + expected_name + "'";
  if (m.plugin_abi != kPluginAbi)
    return "plugin ABI " + std::to_string(m.plugin_abi) + ", this core expects plugin ABI " +
           std::to_string(kPluginAbi);
  if (m.kind == "triton") {  // Python objects cross, nothing of C++: torch's release range alone
    if (!version_in_range(torch_major_minor(), m.torch_versions))
      return "supports torch " + m.torch_versions + ", this process runs torch " + torch_major_minor();
    return std::nullopt;
  }
  if (m.torch_abi == "stable") {
    // Later torch releases keep the stable ABI's C functions: older ones may lack some.
    if (major_minor(m.torch_version) > major_minor(torch_major_minor()))
      return "built on torch's stable ABI for torch " + m.torch_version + " and later, this process runs torch " +
             torch_major_minor() + ", which is older";
    return std::nullopt;  // the C++ ABI flag does not cross the stable ABI: only C functions do
  }
  if (m.torch_version != torch_major_minor())
    return "built against torch " + m.torch_version + ", this process runs torch " + torch_major_minor();
  if (m.cxx11_abi != cxx11_abi())
    return std::string("built with _GLIBCXX_USE_CXX11_ABI=") + (m.cxx11_abi ? "1" : "0") +
           ", this core uses " + (cxx11_abi() ? "1" : "0");
  return std::nullopt;
}

std::string plugin_file_name(const std::string& backend) { return "libbackplane_" + backend + ".so"; }
std::string manifest_file_name(const std::string& backend) { return "libbackplane_" + backend + ".manifest.yaml"; }

}  // namespace backplane
