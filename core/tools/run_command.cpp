// `backplane run MODEL.pt2 --input MODEL.io.pt [--backends cpu,cuda] [--repeat N]`:
// runs an AOTInductor package from C++ with no Python in the process. Loads the named
// plugins first, checks the package calls nothing this process lacks, then runs it on
// every case of the reference file written at export time (batch sizes other than the
// traced one among them), compares with the saved outputs and reports latency.
#include "cli.h"
#include "package_check.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>

namespace backplane::cli {
namespace {

struct Case {
  int64_t batch = 0;
  std::vector<at::Tensor> inputs, expected;
};

struct Reference {
  double atol = 0, rtol = 0;
  std::vector<Case> cases;
};

std::vector<at::Tensor> tensors(const c10::IValue& list) {
  std::vector<at::Tensor> out;
  for (const auto& t : list.toListRef()) out.push_back(t.toTensor());
  return out;
}

// The file models/pipeline.py writes with torch.save: {"atol", "rtol", "cases": [{"batch",
// "inputs", "expected"}]}.
Reference read_reference(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the reference file " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::IValue root = torch::pickle_load(bytes);
  if (!root.isGenericDict()) throw std::runtime_error(path + ": expected a dict saved by models/pipeline.py");
  const auto dict = root.toGenericDict();
  for (const char* key : {"atol", "rtol", "cases"})
    if (!dict.contains(key)) throw std::runtime_error(path + ": missing key '" + key + "'");
  Reference ref;
  ref.atol = dict.at("atol").toDouble();
  ref.rtol = dict.at("rtol").toDouble();
  for (const auto& item : dict.at("cases").toListRef()) {
    const auto c = item.toGenericDict();
    ref.cases.push_back({c.at("batch").toInt(), tensors(c.at("inputs")), tensors(c.at("expected"))});
  }
  return ref;
}

// Empty when they match; else what differs.
std::string compare(const at::Tensor& actual_on_device, const at::Tensor& expected, const Reference& ref) {
  const at::Tensor actual = actual_on_device.cpu();
  if (actual.sizes() != expected.sizes() || actual.scalar_type() != expected.scalar_type())
    return "expected " + c10::str(expected.sizes(), " ", expected.scalar_type()) + ", found " +
           c10::str(actual.sizes(), " ", actual.scalar_type());
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

}  // namespace

int run_command(const Options& options) {
  std::string package, input;
  int repeat = 20;
  for (size_t i = 0; i < options.rest.size(); ++i) {
    const std::string& arg = options.rest[i];
    if ((arg == "--input" || arg == "--repeat") && i + 1 >= options.rest.size()) {
      std::cerr << "backplane run: " << arg << " needs a value\n";
      return 2;
    }
    if (arg == "--input")
      input = options.rest[++i];
    else if (arg == "--repeat")
      repeat = std::max(1, std::atoi(options.rest[++i].c_str()));
    else if (package.empty())
      package = arg;
    else {
      std::cerr << "backplane run: unexpected argument '" << arg << "'\n";
      return 2;
    }
  }
  if (package.empty() || input.empty()) {
    std::cerr << "usage: backplane run MODEL.pt2 --input MODEL.io.pt [--backends a,b] [--repeat N]\n";
    return 2;
  }

  if (!std::ifstream(package)) {
    std::cerr << "backplane run: cannot read the package " << package << "\n";
    return 1;
  }
  load_selected(options);  // plugins first: their kernels must be registered before the package runs
  const PackageNeeds needs = package_needs(package);
  if (const auto problems = missing_for(needs); !problems.empty()) {
    std::cerr << "backplane run: " << package << " cannot run in this process:\n";
    for (const auto& p : problems) std::cerr << "  " << p << "\n";
    return 1;
  }
  const Reference ref = read_reference(input);

  // Where torch supports it (2.14), the package then checks that inputs have the
  // strides it was compiled for instead of reading them wrongly.
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  const auto start = std::chrono::steady_clock::now();
  torch::inductor::AOTIModelPackageLoader loader(package, "model");
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const c10::Device device(needs.device);
  std::cout << "loaded " << package << " for " << needs.device << " in " << std::fixed << std::setprecision(1) << load_ms
            << " ms; backplane ops: " << needs.ops.size() << ", custom classes: " << needs.classes.size() << "\n";

  // First every case once (the check, and the warm-up: first runs pay for lazy
  // initialisation), then the timing.
  std::vector<std::vector<at::Tensor>> inputs(ref.cases.size());
  std::vector<std::string> problems(ref.cases.size());
  int failures = 0;
  for (size_t k = 0; k < ref.cases.size(); ++k) {
    const Case& c = ref.cases[k];
    for (const auto& t : c.inputs) inputs[k].push_back(t.to(device));
    const auto outputs = loader.run(inputs[k]);
    problems[k] = outputs.size() == c.expected.size()
                      ? ""
                      : c10::str("expected ", c.expected.size(), " outputs, found ", outputs.size());
    for (size_t i = 0; problems[k].empty() && i < outputs.size(); ++i) problems[k] = compare(outputs[i], c.expected[i], ref);
    failures += !problems[k].empty();
  }
  for (size_t k = 0; k < ref.cases.size(); ++k) {
    std::vector<double> samples;
    for (int i = 0; i < repeat + 2; ++i) {
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      loader.run(inputs[k]);
      synchronize(device);
      if (i >= 2) samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::cout << "batch " << std::setw(3) << ref.cases[k].batch << ": "
              << (problems[k].empty() ? (ref.atol == 0 && ref.rtol == 0 ? "matches bit for bit" : "matches within tolerance")
                                      : "MISMATCH: " + problems[k])
              << "; median " << std::setprecision(3) << median_ms(samples) << " ms over " << repeat << " runs\n";
  }
  if (failures) std::cerr << "backplane run: " << failures << " of " << ref.cases.size() << " cases did not match\n";
  return failures ? 1 : 0;
}

}  // namespace backplane::cli
