// `backplane tune`: times each plugin serving an op on one device and writes a selection
// file (python/backplane/bench/tune.py, the Python side, which runs the benchmark engine).
#include "cli.h"

#include <string>
#include <vector>

namespace backplane::cli {

int tune_command(const Options& options) {
  pass_common_flags_on(options);
  std::vector<std::string> args = {"tune"};
  if (options.backends) args.insert(args.end(), {"--backends", join(*options.backends, ",")});
  if (!options.ops.empty()) args.insert(args.end(), {"--ops", join(options.ops, ",")});
  args.insert(args.end(), options.rest.begin(), options.rest.end());
  return exec_python_side("tune", args, "tune");
}

}  // namespace backplane::cli
