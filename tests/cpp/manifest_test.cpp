// Plugin manifests: the build writes them, the loader reads them before dlopen.
#include "plugins/manifest.h"
#include "plugins/version_range.h"
#include <backplane/registry.h>
#include <backplane/plugin_abi.h>

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <fstream>

namespace backplane {
namespace {

std::string cpu_manifest_path() { return std::string(BACKPLANE_PLUGIN_DIR) + "/" + manifest_file_name("cpu"); }

// A manifest written to a scratch file, removed when the test's scope ends (pass or fail).
class TempManifest {
 public:
  explicit TempManifest(const std::string& text) {
    char name[] = "/tmp/backplane_manifest_XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    std::ofstream(name) << text;
    close(fd);
    path_ = name;
  }
  ~TempManifest() { std::remove(path_.c_str()); }
  TempManifest(const TempManifest&) = delete;
  TempManifest& operator=(const TempManifest&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Manifest, BuildWritesTheCpuManifest) {
  const Manifest m = read_manifest(cpu_manifest_path());
  EXPECT_EQ(m.name, "cpu");
  EXPECT_EQ(m.dispatch_key, "CPU");
  EXPECT_EQ(m.plugin_abi, kPluginAbi);
  EXPECT_EQ(m.torch_version, torch_major_minor());
  EXPECT_EQ(m.cxx11_abi, cxx11_abi());
  // What the plugin registered, in registry order; the cpu plugin implements add.
  std::vector<std::string> in_registry_order;
  for (const auto& op : registry().ops())
    if (std::count(m.ops.begin(), m.ops.end(), op.name)) in_registry_order.push_back(op.name);
  EXPECT_EQ(m.ops, in_registry_order) << "the manifest lists an op the registry lacks, or out of order";
  EXPECT_TRUE(std::count(m.ops.begin(), m.ops.end(), "add"));
  EXPECT_EQ(manifest_incompatibility(m, "cpu"), std::nullopt);
}

TEST(Manifest, RoundTrips) {
  Manifest m = read_manifest(cpu_manifest_path());
  const TempManifest file(manifest_to_yaml(m));
  const Manifest again = read_manifest(file.path());
  EXPECT_EQ(again.ops, m.ops);
  EXPECT_EQ(again.version, m.version);
}

TEST(Manifest, IncompatibilitiesNameBothSides) {
  const Manifest good = read_manifest(cpu_manifest_path());
  Manifest m = good;
  m.torch_version = "2.0";
  EXPECT_EQ(manifest_incompatibility(m, "cpu"),
            "built against torch 2.0, this process runs torch " + torch_major_minor());
  m = good;
  m.plugin_abi = kPluginAbi + 1;
  EXPECT_EQ(manifest_incompatibility(m, "cpu"), "plugin ABI " + std::to_string(kPluginAbi + 1) +
                                                    ", this core expects plugin ABI " + std::to_string(kPluginAbi));
  m = good;
  m.cxx11_abi = !good.cxx11_abi;
  EXPECT_NE(manifest_incompatibility(m, "cpu")->find("_GLIBCXX_USE_CXX11_ABI"), std::string::npos);
  EXPECT_EQ(manifest_incompatibility(good, "gpu"), "manifest names backend 'cpu', expected 'gpu'");
}

// A stable-ABI plugin (torch/csrc/stable only) runs under the torch it targets or any later.
TEST(Manifest, StableAbiPluginsRunUnderTheirTargetTorchOrLater) {
  Manifest m = read_manifest(cpu_manifest_path());
  m.torch_abi = "stable";
  const auto [major, minor] = *major_minor(torch_major_minor());
  m.torch_version = std::to_string(major) + "." + std::to_string(minor - 1);
  EXPECT_EQ(manifest_incompatibility(m, "cpu"), std::nullopt);
  m.torch_version = torch_major_minor();
  EXPECT_EQ(manifest_incompatibility(m, "cpu"), std::nullopt);
  m.cxx11_abi = !m.cxx11_abi;  // only C functions cross the stable ABI
  EXPECT_EQ(manifest_incompatibility(m, "cpu"), std::nullopt);
  m.torch_version = std::to_string(major) + "." + std::to_string(minor + 1);
  EXPECT_EQ(manifest_incompatibility(m, "cpu"),
            "built on torch's stable ABI for torch " + m.torch_version + " and later, this process runs torch " +
                torch_major_minor() + ", which is older");
  m.torch_version = std::to_string(major + 1) + ".0";
  EXPECT_NE(manifest_incompatibility(m, "cpu"), std::nullopt) << "a later major version is later too";
  // Written and read back; a full-ABI manifest does not mention it.
  const TempManifest file(manifest_to_yaml(m));
  EXPECT_EQ(read_manifest(file.path()).torch_abi, "stable");
  EXPECT_EQ(manifest_to_yaml(read_manifest(cpu_manifest_path())).find("torch_abi"), std::string::npos);
}

TEST(Manifest, VersionsAreMajorDotMinor) {
  EXPECT_EQ(major_minor("2.14"), std::make_pair(2, 14));
  EXPECT_LT(*major_minor("2.9"), *major_minor("2.13")) << "compared as numbers, not text";
  for (const char* bad : {"2", "2.14.1", "v2.14", "2.x", "", ".14", "2.", " 2.14", "+2.14"})
    EXPECT_EQ(major_minor(bad), std::nullopt) << bad;
}

TEST(Manifest, BadFilesSayWhereAndWhat) {
  const TempManifest missing_key_file("backplane_plugin_abi: 1\nname: x\n");
  const std::string& missing_key = missing_key_file.path();
  try {
    read_manifest(missing_key);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "bad manifest " + missing_key + ":1:1: missing key 'version' (a version string)");
  }
  const TempManifest bad_yaml_file("name: [x\n");
  const std::string& bad_yaml = bad_yaml_file.path();
  try {
    read_manifest(bad_yaml);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad manifest " + bad_yaml + ":2:1: invalid YAML", 0), 0u) << e.what();
  }
  const TempManifest bad_type_file(
      "backplane_plugin_abi: one\nname: x\nversion: '1'\ndispatch_key: CPU\ntorch_version: '2.1'\ncxx11_abi: true\n"
      "ops: []\n");
  const std::string& bad_type = bad_type_file.path();
  try {
    read_manifest(bad_type);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad manifest " + bad_type + ":1:23: key 'backplane_plugin_abi' should be an integer");
  }
  EXPECT_THROW(read_manifest("/nonexistent/manifest.yaml"), std::runtime_error);
}

// The cpu manifest's text with `extra` appended: valid but for what extra adds.
// The cpu manifest without its last line, build_type (which BuildTypeIsRecorded tests), so
// the appended key sits on line 10 whatever the build.
std::string cpu_manifest_plus(const std::string& extra) {
  Manifest m = read_manifest(cpu_manifest_path());
  m.build_type.clear();
  return manifest_to_yaml(m) + extra;
}

std::string manifest_error(const std::string& path) {
  try {
    read_manifest(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Manifest, RepeatedKeyIsRefused) {
  // yaml-cpp keeps both entries and node[key] reads the first: the second was dropped.
  const TempManifest file(cpu_manifest_plus("name: other\n"));
  const std::string& path = file.path();
  EXPECT_EQ(manifest_error(path),
            "bad manifest " + path + ":10:1: key 'name' appears twice in one mapping (first at line 3, column 1)");
}

TEST(Manifest, UnknownKeyIsRefused) {
  const TempManifest file(cpu_manifest_plus("dispatch_keys: [CPU]\n"));
  const std::string& path = file.path();
  EXPECT_EQ(manifest_error(path), "bad manifest " + path +
                                      ":10:1: unknown manifest key 'dispatch_keys'; expected one of: backplane_plugin_abi, "
                                      "build_type, cxx11_abi, dispatch_key, kind, name, ops, python_module, python_path, registration, registry, "
                                      "torch_abi, torch_version, version");
}

// The build writes the CMake build type (backplane_add_plugin); `backplane bench` warns on an
// unoptimised one. Optional: a manifest from before the key loads, and makes no claim.
TEST(Manifest, BuildTypeIsRecordedAndRead) {
  const Manifest cpu = read_manifest(cpu_manifest_path());
  EXPECT_FALSE(cpu.build_type.empty()) << "backplane_add_plugin passes --build-type";
  {
    const TempManifest file(cpu_manifest_plus("build_type: Debug\n"));
    const Manifest m = read_manifest(file.path());
    EXPECT_EQ(m.build_type, "Debug");
    const TempManifest again(manifest_to_yaml(m));
    EXPECT_EQ(read_manifest(again.path()).build_type, "Debug") << "written back by manifest_to_yaml";
  }
  EXPECT_EQ(read_manifest(TempManifest(cpu_manifest_plus("")).path()).build_type, "");
  EXPECT_EQ(unoptimised_build_type("Debug"), "a Debug build");
  EXPECT_EQ(unoptimised_build_type("none"), "built with no CMAKE_BUILD_TYPE (no optimisation flags)");
  for (const char* optimised : {"Release", "RelWithDebInfo", "MinSizeRel", "release", ""})
    EXPECT_EQ(unoptimised_build_type(optimised), std::nullopt) << optimised;
}

TEST(Manifest, TorchAbiAndVersionAreChecked) {
  {
    const TempManifest file(cpu_manifest_plus("torch_abi: limited\n"));
    EXPECT_EQ(manifest_error(file.path()),
              "bad manifest " + file.path() + ":10:12: key 'torch_abi' should be full or stable, found 'limited'");
  }
  {
    std::string text = manifest_to_yaml(read_manifest(cpu_manifest_path()));
    text.replace(text.find("torch_version: \""), std::string("torch_version: \"").size() + 1, "torch_version: \"x");
    const TempManifest file(text);
    EXPECT_NE(manifest_error(file.path()).find("key 'torch_version' should be torch major.minor such as \"2.14\""),
              std::string::npos)
        << manifest_error(file.path());
  }
}

TEST(Manifest, PythonSideIsOptionalAndStaysInsideThePluginDirectory) {
  {
    const TempManifest file(cpu_manifest_plus("python_module: backplane_acme\npython_path: python\n"));
    const Manifest m = read_manifest(file.path());
    EXPECT_EQ(m.python_module, "backplane_acme");
    EXPECT_EQ(m.python_path, "python");
    const TempManifest again(manifest_to_yaml(m));
    EXPECT_EQ(read_manifest(again.path()).python_module, "backplane_acme") << "written back by manifest_to_yaml";
  }
  {
    const TempManifest file(cpu_manifest_plus("python_module: backplane_acme\n"));
    EXPECT_EQ(read_manifest(file.path()).python_path, "") << "no path: imported by name";
  }
  {
    const TempManifest file(cpu_manifest_plus("python_module: m\npython_path: ../../etc\n"));
    EXPECT_EQ(manifest_error(file.path()), "bad manifest " + file.path() +
                                               ":11:14: key 'python_path' should be a directory relative to the "
                                               "manifest, without '..'; found '../../etc'");
  }
  {
    const TempManifest file(cpu_manifest_plus("python_module: ../x\n"));
    EXPECT_NE(manifest_error(file.path()).find("key 'python_module' should be a dotted Python module name"),
              std::string::npos)
        << manifest_error(file.path());
  }
  {
    const TempManifest file(cpu_manifest_plus("python_path: python\n"));
    EXPECT_EQ(manifest_error(file.path()), "bad manifest " + file.path() + ":10:14: key 'python_path' needs 'python_module'");
  }
}

// kind: triton (manifest.h): a Python package of launchers, no library.
const char* kTritonManifest =
    "backplane_plugin_abi: 1\nname: tk\nversion: \"0.1\"\nkind: triton\ndispatch_key: CUDA\n"
    "python_module: backplane_tk\nops: [add, mul]\ntriton: \">=3.0,<4\"\ntorch: \">=2.11\"\n";

TEST(Manifest, TritonKindNamesItsPackageOpsAndRanges) {
  const TempManifest file(kTritonManifest);
  const Manifest m = read_manifest(file.path());
  EXPECT_EQ(m.kind, "triton");
  EXPECT_EQ(m.python_module, "backplane_tk");
  EXPECT_EQ(m.ops, (std::vector<std::string>{"add", "mul"}));
  EXPECT_EQ(m.triton_versions, ">=3.0,<4");
  EXPECT_EQ(m.torch_versions, ">=2.11");
  EXPECT_EQ(manifest_incompatibility(m, "tk"), std::nullopt);
  const TempManifest again(manifest_to_yaml(m));
  const Manifest back = read_manifest(again.path());
  EXPECT_EQ(back.kind, "triton");
  EXPECT_EQ(back.triton_versions, m.triton_versions);
  EXPECT_EQ(back.ops, m.ops);
  // No kind is a library, as every manifest written before kinds existed.
  EXPECT_EQ(read_manifest(cpu_manifest_path()).kind, "shared_library");
  const TempManifest explicit_library(cpu_manifest_plus("kind: shared_library\n"));
  EXPECT_EQ(read_manifest(explicit_library.path()).kind, "shared_library");
}

TEST(Manifest, TritonKindIsCheckedAgainstThisTorch) {
  const TempManifest file(kTritonManifest);
  Manifest m = read_manifest(file.path());
  m.torch_versions = ">=99.0";
  EXPECT_EQ(manifest_incompatibility(m, "tk"), "supports torch >=99.0, this process runs torch " + torch_major_minor());
  m.torch_versions = "<2.0";
  EXPECT_NE(manifest_incompatibility(m, "tk"), std::nullopt);
}

TEST(Manifest, TritonKindRefusesWhatIsNotItsOwn) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kTritonManifest;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  {
    const TempManifest file(with("dispatch_key: CUDA", "dispatch_key: CPU"));
    EXPECT_EQ(manifest_error(file.path()), "bad manifest " + file.path() + ":5:15: a plugin of kind triton serves "
                                           "dispatch key CUDA (what Triton compiles for here), found 'CPU'");
  }
  {
    const TempManifest file(with("python_module: backplane_tk\n", ""));
    EXPECT_NE(manifest_error(file.path()).find("missing key 'python_module' (the package whose kernels() gives its "
                                               "launchers: a plugin of kind triton has no library)"),
              std::string::npos)
        << manifest_error(file.path());
  }
  {
    const TempManifest file(with("triton: \">=3.0,<4\"", "triton: \"3.0\""));
    EXPECT_EQ(manifest_error(file.path()),
              "bad manifest " + file.path() + ":8:9: key 'triton': '3.0' is not a clause such as >=2.11 (an operator "
              ">=, >, <=, <, == or != and a version of one to three whole numbers, clauses separated by ',')");
  }
  {
    const TempManifest file(std::string(kTritonManifest) + "cxx11_abi: true\n");
    EXPECT_NE(manifest_error(file.path()).find("unknown triton manifest key 'cxx11_abi'"), std::string::npos)
        << manifest_error(file.path());
  }
  {
    const TempManifest file(with("kind: triton", "kind: wasm"));
    EXPECT_EQ(manifest_error(file.path()),
              "bad manifest " + file.path() + ":4:7: key 'kind' should be shared_library or triton, found 'wasm'");
  }
}

TEST(VersionRange, ClausesAllHold) {
  EXPECT_TRUE(version_in_range("3.8.0", ">=3.0,<4"));
  EXPECT_TRUE(version_in_range("2.14.1+cu130", ">=2.11"));
  EXPECT_TRUE(version_in_range("2.14", "==2.14.0"));
  EXPECT_TRUE(version_in_range("3.5.0a0", ">=3.5, !=3.6"));
  EXPECT_FALSE(version_in_range("4.0", ">=3.0,<4"));
  EXPECT_FALSE(version_in_range("2.9", ">=2.11")) << "compared as numbers, not text";
  EXPECT_FALSE(version_in_range("", ">=0")) << "no version lies in any range";
  for (const char* bad : {"", "3.0", ">=", ">=3.x", ">=1.2.3.4", ">=3,", "~=3.0"})
    EXPECT_NE(version_range_error(bad), std::nullopt) << bad;
  EXPECT_THROW(version_in_range("3.0", "3.0"), std::invalid_argument);
}

}  // namespace
}  // namespace backplane
