// `backplane check`: the conformance suite on each loaded backend, one line per op.
#include "cli.h"

#include "../../tests/conformance/conformance.h"

#include <backplane/registry.h>

#include <iomanip>
#include <iostream>

namespace backplane::cli {

int check_command(const Options& options) {
  int failures = 0;
  std::cout << std::left << std::setw(10) << "BACKEND" << std::setw(16) << "OP" << std::setw(8) << "PASSED"
            << std::setw(8) << "FAILED" << "SKIPPED\n";
  for (const auto& record : load_selected(options)) {
    if (record.status != BackendStatus::Loaded) {
      std::cout << std::setw(10) << record.name << "not checked: " << to_string(record.status) << ": " << record.reason
                << "\n";
      continue;
    }
    std::string why;
    auto device = conformance::device_for_key(record.dispatch_key, &why);
    if (!device) {
      std::cout << std::setw(10) << record.name << "not checked: " << why << "\n";
      continue;
    }
    for (const auto& suite : conformance::suites()) {
      int passed = 0, failed = 0, skipped = 0;
      std::vector<conformance::Result> bad;
      for (const auto& c : suite.cases)
        for (auto dtype : registry().find(suite.op)->dtypes) {
          auto r = conformance::run_case(suite, c, dtype, *device);
          if (r.skipped) ++skipped;
          else if (r.passed) ++passed;
          else { ++failed; bad.push_back(r); }
        }
      std::cout << std::setw(10) << record.name << std::setw(16) << suite.op << std::setw(8) << passed << std::setw(8)
                << failed << skipped << "\n";
      for (const auto& r : bad) std::cout << "    FAILED " << r.case_name << " [" << r.dtype << "]: " << r.detail << "\n";
      failures += failed;
    }
  }
  std::cout << (failures == 0 ? "all checks passed against PyTorch\n" : "some checks FAILED\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace backplane::cli
