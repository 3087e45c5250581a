// Plugin manifests: the build writes them, the loader reads them before dlopen.
#include <backplane/manifest.h>
#include <backplane/registry.h>
#include <backplane/plugin_abi.h>

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <fstream>

namespace backplane {
namespace {

std::string cpu_manifest_path() { return std::string(BACKPLANE_PLUGIN_DIR) + "/" + manifest_file_name("cpu"); }

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/backplane_manifest_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::ofstream(path) << text;
  close(fd);
  return path;
}

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
  const std::string path = write_temp(manifest_to_yaml(m));
  const Manifest again = read_manifest(path);
  EXPECT_EQ(again.ops, m.ops);
  EXPECT_EQ(again.version, m.version);
  std::remove(path.c_str());
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

TEST(Manifest, BadFilesSayWhereAndWhat) {
  const std::string missing_key = write_temp("backplane_plugin_abi: 1\nname: x\n");
  try {
    read_manifest(missing_key);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "bad manifest " + missing_key + ":1:1: missing key 'version' (a version string)");
  }
  const std::string bad_yaml = write_temp("name: [x\n");
  try {
    read_manifest(bad_yaml);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad manifest " + bad_yaml + ":2:1: invalid YAML", 0), 0u) << e.what();
  }
  const std::string bad_type = write_temp(
      "backplane_plugin_abi: one\nname: x\nversion: '1'\ndispatch_key: CPU\ntorch_version: '2.1'\ncxx11_abi: true\n"
      "ops: []\n");
  try {
    read_manifest(bad_type);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad manifest " + bad_type + ":1:23: key 'backplane_plugin_abi' should be an integer");
  }
  EXPECT_THROW(read_manifest("/nonexistent/manifest.yaml"), std::runtime_error);
  for (const auto& p : {missing_key, bad_yaml, bad_type}) std::remove(p.c_str());
}

// The cpu manifest's text with `extra` appended: valid but for what extra adds.
std::string cpu_manifest_plus(const std::string& extra) {
  return manifest_to_yaml(read_manifest(cpu_manifest_path())) + extra;
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
  const std::string path = write_temp(cpu_manifest_plus("name: other\n"));
  EXPECT_EQ(manifest_error(path),
            "bad manifest " + path + ":10:1: key 'name' appears twice in one mapping (first at line 3, column 1)");
  std::remove(path.c_str());
}

TEST(Manifest, UnknownKeyIsRefused) {
  const std::string path = write_temp(cpu_manifest_plus("dispatch_keys: [CPU]\n"));
  EXPECT_EQ(manifest_error(path), "bad manifest " + path +
                                      ":10:1: unknown manifest key 'dispatch_keys'; expected one of: backplane_plugin_abi, "
                                      "cxx11_abi, dispatch_key, name, ops, python_module, python_path, registration, registry, torch_version, version");
  std::remove(path.c_str());
}

TEST(Manifest, PythonSideIsOptionalAndStaysInsideThePluginDirectory) {
  std::string path = write_temp(cpu_manifest_plus("python_module: backplane_acme\npython_path: python\n"));
  Manifest m = read_manifest(path);
  EXPECT_EQ(m.python_module, "backplane_acme");
  EXPECT_EQ(m.python_path, "python");
  EXPECT_EQ(read_manifest(path).python_module, read_manifest(write_temp(manifest_to_yaml(m))).python_module);
  std::remove(path.c_str());
  path = write_temp(cpu_manifest_plus("python_module: backplane_acme\n"));
  EXPECT_EQ(read_manifest(path).python_path, "") << "no path: imported by name";
  std::remove(path.c_str());
  path = write_temp(cpu_manifest_plus("python_module: m\npython_path: ../../etc\n"));
  EXPECT_EQ(manifest_error(path), "bad manifest " + path +
                                      ":11:14: key 'python_path' should be a directory relative to the manifest, "
                                      "without '..'; found '../../etc'");
  std::remove(path.c_str());
  path = write_temp(cpu_manifest_plus("python_module: ../x\n"));
  EXPECT_NE(manifest_error(path).find("key 'python_module' should be a dotted Python module name"), std::string::npos)
      << manifest_error(path);
  std::remove(path.c_str());
  path = write_temp(cpu_manifest_plus("python_path: python\n"));
  EXPECT_EQ(manifest_error(path), "bad manifest " + path + ":10:14: key 'python_path' needs 'python_module'");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace backplane
