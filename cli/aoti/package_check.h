// Before an AOTInductor package is loaded: does this process have what it calls?
// A package names backplane ops (in its proxy-executor JSON) and custom classes (in
// custom_objs_config.json), and resolves them only when it runs; a missing kernel then
// surfaces as a dispatcher error deep in the run. This check names the missing op, the
// device, and the plugin that would provide it, before anything is loaded.
#pragma once

#include <string>
#include <vector>

namespace backplane::cli {

struct PackageNeeds {
  std::string device;                // the package's AOTI_DEVICE_KEY: "cpu", "cuda", a plugin's "npu"
  std::vector<std::string> ops;      // backplane ops it calls, directly or through a class method
  std::vector<std::string> classes;  // custom classes it holds, fully qualified
};

// The archive's entry names. Throws std::runtime_error naming the first entry that the
// archive holds more than once (miniz reads the first of them, Python's zipfile the last:
// two readers would see two packages), or that would be written outside the extraction
// folder (an absolute path or a `..` component: zip-slip); call it before anything reads
// or extracts the package (AOTIModelPackageLoader extracts, unchecked).
std::vector<std::string> check_entries(const std::string& package);

// Reads the package's metadata and records. Throws std::runtime_error if it is not a
// readable .pt2 package, or if its device is none this process has (a plugin's device,
// npu, exists once its plugin is loaded): the message names the plugin to load.
PackageNeeds package_needs(const std::string& package);

// Empty when every op has a kernel for the package's device in this process and every
// class is registered; otherwise one line per problem, each naming what to load.
std::vector<std::string> missing_for(const PackageNeeds& needs);

}  // namespace backplane::cli
