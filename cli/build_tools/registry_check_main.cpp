// backplane_registry_check [--markdown OUT] FILE...: parses registry files the way the
// core does (every formula checked against the dispatcher's schemas), evaluates each op's
// reference on its first sample (CPU, float64), and prints each file's first error as
// file:line:column: message, once, exiting 1 (2: a usage error). With --markdown, also
// writes the op table the docs show (generated at build time, never committed). Run by
// the build, which loads the core built from the same files: an error the core's own
// parse meets is said by the core (registry()), the same way.
#include "conformance/inputs.h"
#include "formula/reference_expr.h"
#include <backplane/registry.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace {

// The bench's baseline must compute what the reference computes (on the first sample, in
// float64): a baseline of another function would make every speed ratio meaningless.
void check_baseline(const backplane::OpDef& op, const std::map<std::string, c10::IValue>& names,
                    const std::vector<c10::IValue>& expected) {
  std::vector<c10::IValue> got;
  try {
    got = backplane::conformance::reference_values(
        op, backplane::conformance::ReferenceExpr::parse(op.checks.baseline), names);
  } catch (const std::exception& e) {
    throw backplane::RegistryError(op.checks.baseline_where, "baseline of '" + op.name + "' fails on sample '" +
                                                                 op.checks.samples.front().name + "': " + e.what());
  }
  bool same = got.size() == expected.size();
  for (size_t k = 0; same && k < got.size(); ++k)
    same = got[k].isTensor() && got[k].toTensor().sizes() == expected[k].toTensor().sizes() &&
           at::allclose(got[k].toTensor().to(at::kDouble), expected[k].toTensor(), 1e-7, 1e-9);
  if (!same)
    throw backplane::RegistryError(op.checks.baseline_where, "baseline of '" + op.name + "' does not compute what its "
                                                             "reference computes (sample '" +
                                                                 op.checks.samples.front().name + "', float64)");
}

// The reference must run: a misspelt aten op or argument fails the build, not a test.
void check_reference(const backplane::OpDef& op) {
  if (op.checks.reference.empty()) return;
  const backplane::OpInputs& sample = op.checks.samples.front();
  const auto args = backplane::conformance::op_arguments(
      op, sample, [](at::IntArrayRef sizes) { return at::randn(sizes, at::kDouble); });
  std::map<std::string, c10::IValue> names;
  for (size_t i = 0; i < args.size(); ++i) names[op.arguments[i].name()] = args[i];
  try {
    const auto values = backplane::conformance::reference_values(
        op, backplane::conformance::ReferenceExpr::parse(op.checks.reference), names);
    const size_t outputs = std::max<size_t>(op.new_outputs(), 1);
    if (values.size() != outputs)
      throw std::invalid_argument("it gives " + std::to_string(values.size()) + " value(s) for the op's " +
                                  std::to_string(outputs) + " output(s) (several outputs: a list [a, b] of their references)");
    for (const auto& value : values)
      if (!value.isTensor()) throw std::invalid_argument("it gives no tensor");
    if (!op.checks.baseline.empty()) check_baseline(op, names, values);
  } catch (const c10::Error& e) {
    throw backplane::RegistryError(op.checks.reference_where, "reference of '" + op.name + "' fails on sample '" +
                                                                  sample.name + "': " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw backplane::RegistryError(op.checks.reference_where,
                                   "reference of '" + op.name + "' fails on sample '" + sample.name + "': " + e.what());
  }
}

std::string markdown(const backplane::Registry& all) {
  std::ostringstream out;
  out << "<!-- Generated from registry/*.yaml by backplane_registry_check at build time. -->\n"
      << "| op | schema | what it computes | dtypes | checked against |\n|---|---|---|---|---|\n";
  for (const auto& op : all.ops()) {
    std::string dtypes;
    for (auto d : op.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + backplane::dtype_name(d);
    out << "| " << op.name << " | `" << op.schema << "` | " << op.doc << " | " << dtypes << " | "
        << (op.checks.reference.empty() ? "its contract only" : "`" + op.checks.reference + "`") << " |\n";
  }
  return out.str();
}

// The files named on the command line, or a usage error (exit 2) naming the flag or file.
struct Arguments {
  std::vector<std::pair<std::string, std::string>> files;  // path, text
  std::string markdown_path;
};

int read_arguments(int argc, char** argv, Arguments& out) {
  const char* usage = "usage: backplane_registry_check [--markdown OUT] FILE...";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--markdown") {
      if (i + 1 >= argc) {
        std::cerr << "backplane_registry_check: --markdown needs a file to write\n" << usage << "\n";
        return 2;
      }
      out.markdown_path = argv[++i];
      continue;
    }
    std::ifstream in(arg);
    if (!in) {
      std::cerr << arg << ": cannot read\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    out.files.emplace_back(arg, text.str());
  }
  if (out.files.empty()) {
    std::cerr << usage << "\n";
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (const int status = read_arguments(argc, argv, args)) return status;
  backplane::Registry all;
  // Each file's first error, as a compiler gives one per file; then the cross-file checks.
  std::vector<backplane::Registry> parsed;
  bool failed = false;
  for (const auto& [path, text] : args.files) {
    try {
      parsed.push_back(backplane::parse_registry(text, path));
    } catch (const backplane::RegistryError& e) {
      std::cerr << e.what() << "\n";
      failed = true;
    }
  }
  if (failed) return 1;
  try {
    for (auto& file : parsed) all.merge(std::move(file));
    all.check_classes();
    for (const auto& op : all.ops()) check_reference(op);
  } catch (const backplane::RegistryError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  if (!args.markdown_path.empty()) std::ofstream(args.markdown_path) << markdown(all);
  std::cout << "registry: " << all.ops().size() << " ops, " << all.classes().size() << " classes OK\n";
  return 0;
}
