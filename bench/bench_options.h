// What backplane_bench runs: backends, ops, dtypes and shape presets, taken from its
// command line before Google Benchmark reads the rest.
//   --backends=cpu,cuda   default: BACKPLANE_BACKENDS, else cpu
//   --ops=add,rms_norm    default: every registry op
//   --dtypes=float32,bfloat16   default: float32 and bfloat16 (where the op takes them)
//   --shapes=NAME,...     registry bench presets by name (e.g. decode_32x8192), or all;
//                         default: each op's first preset
//   --min-time=SECONDS    least time each row samples (adaptive_stop.h; default 0.05)
//   --max-time=SECONDS    most time each row samples (default 0.5; at least --min-time)
//   --cuda-graph          time CUDA rows as replays of a recorded CUDA graph (recorded_batch.h)
//   --backward            time forward+backward of each op with a `backward:` (backward_workloads.h)
//   --cold-l2             cuda rows: each sample one call, after a write of twice the device's L2
//                         cache (cold_cache.h), untimed; no effect on other devices' rows
// Each also as two arguments (--ops add); the flags without a value take none (--cold-l2=yes
// is refused). Unknown names are errors naming the known ones.
// Google Benchmark's --benchmark_repetitions, --benchmark_out and --benchmark_out_format
// are checked here and left in argv for it (its own parsing aborts on a negative count).
#pragma once

#include "adaptive_stop.h"

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
  std::set<std::string> shapes;  // empty: each op's first preset
  bool all_shapes = false;       // --shapes all
  StopRule stop;                 // --min-time, --max-time
  bool cuda_graph = false;
  bool backward = false;         // --backward: forward+backward rows
  bool cold_l2 = false;          // --cold-l2: cuda rows sampled one call at a time after an L2 flush
  std::string out_file;          // --benchmark_out: empty, none
  bool out_json = true;          // --benchmark_out_format is json (Google Benchmark's default)

  bool wants_op(const std::string& op) const { return ops.empty() || ops.count(op); }
  // `first`: the preset the op lists first, its one row by default.
  bool wants_shape(const std::string& shape, bool first) const {
    return all_shapes || (shapes.empty() ? first : shapes.count(shape) > 0);
  }
};

inline constexpr double kMaxMinTime = 3600;  // seconds per row; more is a typo, not a plan
inline constexpr int kMaxRepetitions = 1000;

// Removes the options above from argv (argc updated). Throws std::invalid_argument.
BenchOptions take_bench_options(int* argc, char** argv);

// Once the backends are loaded (their fragments may define ops): every --ops and
// --shapes name is known. Throws std::invalid_argument naming the known ones.
void check_names(const BenchOptions& options);

}  // namespace backplane::bench
