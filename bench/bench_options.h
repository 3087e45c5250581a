// What backplane_bench runs: backends, ops, dtypes and shape presets, taken from its
// command line before Google Benchmark reads the rest.
//   --backends=cpu,cuda   default: BACKPLANE_BACKENDS, else cpu
//   --ops=add,rms_norm    default: every registry op
//   --dtypes=float32,bfloat16   default: float32 and bfloat16 (where the op takes them)
//   --shapes=NAME,...     registry bench presets by name (e.g. decode_32x8192); default: all
//   --min-time=SECONDS    least time per repetition (default: Google Benchmark's)
//   --cuda-graph          time CUDA rows as replays of a recorded CUDA graph (recorded_batch.h)
// Each also as two arguments (--ops add). Unknown names are errors naming the known ones.
// Google Benchmark's --benchmark_repetitions, --benchmark_out and --benchmark_out_format
// are checked here and left in argv for it (its own parsing aborts on a negative count).
#pragma once

#include <c10/core/ScalarType.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::bench {

struct BenchOptions {
  std::vector<std::string> backends;
  std::set<std::string> ops;  // empty: every op
  std::vector<c10::ScalarType> dtypes;
  std::set<std::string> shapes;  // empty: every preset
  double min_time = 0;           // seconds; 0: Google Benchmark's default
  bool cuda_graph = false;
  std::string out_file;          // --benchmark_out: empty, none
  bool out_json = true;          // --benchmark_out_format is json (Google Benchmark's default)

  bool wants_op(const std::string& op) const { return ops.empty() || ops.count(op); }
  bool wants_shape(const std::string& shape) const { return shapes.empty() || shapes.count(shape); }
};

inline constexpr double kMaxMinTime = 3600;  // seconds per repetition; more is a typo, not a plan
inline constexpr int kMaxRepetitions = 1000;

// Removes the options above from argv (argc updated). Throws std::invalid_argument.
BenchOptions take_bench_options(int* argc, char** argv);

// Once the backends are loaded (their fragments may define ops): every --ops and
// --shapes name is known. Throws std::invalid_argument naming the known ones.
void check_names(const BenchOptions& options);

}  // namespace backplane::bench
