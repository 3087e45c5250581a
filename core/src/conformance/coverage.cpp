#include "conformance/coverage.h"
#include <backplane/registry.h>

#include <algorithm>

namespace backplane {

std::vector<OpCoverage> coverage(const std::vector<BackendRecord>& records) {
  std::vector<OpCoverage> table;
  for (const OpDef& op : all_ops()) {
    OpCoverage row{op.id(), op.doc, {}};
    for (const auto& record : records) {
      CoverageCell cell{record.name, record.status, false, {}};
      cell.implemented = std::count(record.ops.begin(), record.ops.end(), op.id()) > 0;
      if (cell.implemented)
        for (auto dtype : op.dtypes) cell.dtypes.push_back(dtype_name(dtype));
      row.backends.push_back(std::move(cell));
    }
    table.push_back(std::move(row));
  }
  return table;
}

}  // namespace backplane
