// `backplane run MODEL.pt2 --input MODEL.io.pt [--backends cpu,cuda] [--repeat N]`:
// runs an AOTInductor package from C++ with no Python in the process. Refuses an archive
// whose entries would land outside the extraction folder, loads the named plugins, checks
// the package calls nothing this process lacks and would not run on other plugins than it
// was made with (aoti/package_plugins.h), then runs it on every case of the
// reference file written at export time (batch sizes other than the traced one among
// them), each input checked against the layout the package was compiled for, compares
// with the saved outputs on the CPU and reports latency.
//
// A .pt2 package holds shared libraries: running one runs its code (docs/security.md).
#include "aoti/input_layouts.h"
#include "aoti/package_check.h"
#include "aoti/package_plugins.h"
#include "aoti/reference_file.h"
#include "cli.h"

#include "c_api/json_writer.h"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>

namespace backplane::cli {
namespace {

constexpr int kMaxRepeat = 100000;  // timed runs per case; more is a typo, not a measurement

struct RunArgs {
  std::string package, input;
  int repeat = 20;
  bool allow_plugin_change = false;  // run although the plugins differ from the record, or it has none
};

struct CaseResult {
  int64_t batch = 0;
  std::string problem;                 // empty: matches
  std::vector<std::string> converted;  // inputs copied into the compiled layout
  double median_ms = 0;
};

// What a run found; printed by print_report (a machine-readable form can be added beside it).
struct RunReport {
  std::string package, device;
  double load_ms = 0;
  size_t ops = 0, classes = 0;
  bool exact = false;  // atol = rtol = 0
  int repeat = 0;
  std::vector<std::string> plugins;  // who serves each backplane op the package calls
  std::vector<CaseResult> cases;
  int failures() const {
    return static_cast<int>(std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return !c.problem.empty(); }));
  }
};

// Empty when they match; else what differs. Both sides are compared on the CPU, whatever
// device the package ran on or the reference was saved from. NaN matches NaN at the same
// position (whatever its payload); elsewhere values match bit for bit, or within atol/rtol.
std::string compare(const at::Tensor& actual_on_device, const at::Tensor& expected_anywhere, const Reference& ref) {
  at::Tensor actual = actual_on_device.to(at::kCPU);
  at::Tensor expected = expected_anywhere.to(at::kCPU);
  if (actual.sizes() != expected.sizes() || actual.scalar_type() != expected.scalar_type())
    return "expected " + c10::str(expected.sizes(), " ", expected.scalar_type()) + ", found " +
           c10::str(actual.sizes(), " ", actual.scalar_type());
  if (actual.is_floating_point() || actual.is_complex()) {
    const at::Tensor nan = actual.isnan(), expected_nan = expected.isnan();
    if (!nan.equal(expected_nan)) {
      const int64_t extra = (nan & ~expected_nan).sum().item<int64_t>();
      const int64_t missing = (expected_nan & ~nan).sum().item<int64_t>();
      return c10::str("NaN at ", extra, " positions where the reference holds a number, a number at ", missing,
                      " positions where it holds NaN");
    }
    actual = actual.masked_fill(nan, 0);
    expected = expected.masked_fill(nan, 0);
  }
  const bool exact = ref.atol == 0 && ref.rtol == 0;
  const bool ok = exact ? actual.equal(expected) : at::allclose(actual, expected, ref.rtol, ref.atol);
  if (ok) return "";
  const double diff = (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
  return c10::str(exact ? "expected bit-for-bit equality" : "outside atol/rtol", ", max abs difference ", diff);
}

void synchronize(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index() < 0 ? 0 : device.index());
}

double median_ms(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// The folder AOTIModelPackageLoader extracts the package into, through TMPDIR (which it
// reads): one of this run's own, removed with whatever is in it once the loader is gone.
// torch removes its extraction when the loader is destroyed, but not when loading fails.
class ExtractionFolder {
 public:
  ExtractionFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "backplane-run-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a folder to extract the package into: " + pattern);
    path_ = pattern;
    if (const char* before = std::getenv("TMPDIR")) before_ = before;
    setenv("TMPDIR", path_.c_str(), /*overwrite=*/1);
  }
  ExtractionFolder(const ExtractionFolder&) = delete;
  ExtractionFolder& operator=(const ExtractionFolder&) = delete;
  ~ExtractionFolder() {
    restore_tmpdir();
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  // Once the loader has extracted: later temporary files go where they went before.
  void restore_tmpdir() {
    if (before_) setenv("TMPDIR", before_->c_str(), 1);
    else unsetenv("TMPDIR");
  }

 private:
  std::string path_;
  std::optional<std::string> before_;
};

// --repeat's value, or 0 when it is not an integer from 1 to kMaxRepeat.
int parse_repeat(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool whole = error == std::errc() && end == text.data() + text.size();
  return whole && value >= 1 && value <= kMaxRepeat ? value : 0;
}

// Returns 0, or the exit status for a usage error (after saying why).
int parse_args(const std::vector<std::string>& rest, RunArgs& args) {
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& arg = rest[i];
    if ((arg == "--input" || arg == "--repeat") && i + 1 >= rest.size()) {
      std::cerr << "backplane run: " << arg << " needs a value\n";
      return 2;
    }
    if (arg == "--allow-plugin-change")
      args.allow_plugin_change = true;
    else if (arg == "--input")
      args.input = rest[++i];
    else if (arg == "--repeat") {
      args.repeat = parse_repeat(rest[++i]);
      if (args.repeat == 0) {
        std::cerr << "backplane run: --repeat '" << rest[i] << "': expected a positive integer from 1 to " << kMaxRepeat
                  << "\n";
        return kExitUsage;
      }
    } else if (args.package.empty())
      args.package = arg;
    else {
      std::cerr << "backplane run: unexpected argument '" << arg << "'\n";
      return 2;
    }
  }
  if (args.package.empty() || args.input.empty()) {
    std::cerr << "usage: backplane run MODEL.pt2 --input MODEL.io.pt [--repeat N] [--allow-plugin-change] [--json] "
                 "[common flags]\n";
    return 2;
  }
  return 0;
}

void print_json(const RunReport& r) {
  std::vector<std::string> cases;
  for (const auto& c : r.cases)
    cases.push_back(json::Object()
                        .raw("batch", std::to_string(c.batch))
                        .raw("matches", c.problem.empty() ? "true" : "false")
                        .str("problem", c.problem)
                        .raw("converted", json::list(c.converted))
                        .raw("median_ms", c10::str(c.median_ms))
                        .done());
  std::cout << json::Object()
                   .str("package", r.package)
                   .str("device", r.device)
                   .raw("load_ms", c10::str(r.load_ms))
                   .raw("exact", r.exact ? "true" : "false")
                   .raw("repeat", std::to_string(r.repeat))
                   .raw("plugins", json::list(r.plugins))
                   .raw("cases", json::array(cases))
                   .raw("failures", std::to_string(r.failures()))
                   .done()
            << "\n";
}

void print_report(const RunReport& r) {
  for (const auto& note : r.plugins) std::cout << note << "\n";
  std::cout << "loaded " << r.package << " for " << r.device << " in " << std::fixed << std::setprecision(1) << r.load_ms
            << " ms; backplane ops: " << r.ops << ", custom classes: " << r.classes << "\n";
  for (const auto& c : r.cases) {
    for (const auto& note : c.converted) std::cout << "batch " << std::setw(3) << c.batch << ": " << note << "\n";
    std::cout << "batch " << std::setw(3) << c.batch << ": "
              << (c.problem.empty() ? (r.exact ? "matches bit for bit" : "matches within tolerance") : "MISMATCH: " + c.problem)
              << "; median " << std::setprecision(3) << c.median_ms << " ms over " << r.repeat << " runs\n";
  }
  if (r.failures()) std::cerr << "backplane run: " << r.failures() << " of " << r.cases.size() << " cases did not match\n";
}

}  // namespace

int run_command(const Options& options) {
  RunArgs args;
  if (const int status = parse_args(options.rest, args)) return status;
  if (!std::ifstream(args.package)) {
    std::cerr << "backplane run: cannot read the package " << args.package << "\n";
    return 1;
  }
  check_entries(args.package);  // before anything is extracted
  // Plugins first: their kernels must be registered before the package runs, and their
  // devices before a reference saved on one of them can be read.
  load_selected(options);
  const Reference ref = read_reference(args.input);
  const auto layouts = read_input_layouts(args.package);
  const PackageNeeds needs = package_needs(args.package);
  if (const auto problems = missing_for(needs); !problems.empty()) {
    std::cerr << "backplane run: " << args.package << " cannot run in this process:\n";
    for (const auto& p : problems) std::cerr << "  " << p << "\n";
    return 1;
  }
  const PluginCheck plugins = check_package_plugins(args.package, needs);
  if (!plugins.refused.empty() && !args.allow_plugin_change) {
    std::cerr << "backplane run: " << args.package << ": refused: it would run on other plugins than it was made with, "
              << "or on plugins it cannot be known to have been made with:\n";
    for (const auto& m : plugins.refused) std::cerr << "  " << m << "\n";
    std::cerr << "or run it as it is here: --allow-plugin-change\n";
    return 1;
  }

  const c10::Device device(needs.device);
  // Inputs are checked and placed before the package loads: a refusal costs no load.
  std::vector<std::vector<at::Tensor>> inputs(ref.cases.size());
  RunReport report{args.package, needs.device, 0, needs.ops.size(), needs.classes.size(), ref.atol == 0 && ref.rtol == 0,
                   args.repeat, plugins.notes, std::vector<CaseResult>(ref.cases.size())};
  for (size_t k = 0; k < ref.cases.size(); ++k) {
    const ReferenceCase& c = ref.cases[k];
    report.cases[k].batch = c.batch;
    if (layouts && layouts->size() != c.inputs.size())
      throw std::runtime_error(c10::str(args.input, ": case ", k, " has ", c.inputs.size(), " inputs; the package takes ",
                                        layouts->size()));
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      std::string note;
      try {
        inputs[k].push_back(guard_input(layouts ? &(*layouts)[i] : nullptr, i, c.inputs[i].to(device), note));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(c10::str(args.input, ", case ", k, " (batch ", c.batch, "): ", e.what()));
      }
      if (!note.empty()) report.cases[k].converted.push_back(note);
    }
  }

  // Where torch supports it (2.14), the package then checks the inputs itself too.
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  ExtractionFolder extraction;  // declared first: it outlives the loader
  const auto start = std::chrono::steady_clock::now();
  torch::inductor::AOTIModelPackageLoader loader(args.package, "model");
  extraction.restore_tmpdir();
  report.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  // First every case once (the check, and the warm-up: first runs pay for lazy
  // initialisation), then the timing.
  for (size_t k = 0; k < ref.cases.size(); ++k) {
    const ReferenceCase& c = ref.cases[k];
    const auto outputs = loader.run(inputs[k]);
    std::string& problem = report.cases[k].problem;
    if (outputs.size() != c.expected.size()) problem = c10::str("expected ", c.expected.size(), " outputs, found ", outputs.size());
    for (size_t i = 0; problem.empty() && i < outputs.size(); ++i) problem = compare(outputs[i], c.expected[i], ref);
  }
  for (size_t k = 0; k < ref.cases.size(); ++k) {
    std::vector<double> samples;
    for (int i = 0; i < args.repeat + 2; ++i) {
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      loader.run(inputs[k]);
      synchronize(device);
      if (i >= 2) samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    report.cases[k].median_ms = median_ms(samples);
  }
  if (options.json)
    print_json(report);
  else
    print_report(report);
  return report.failures() ? 1 : 0;
}

}  // namespace backplane::cli
