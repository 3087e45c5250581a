// The `backplane` command: its usage, the flags every command shares, and the dispatch
// to one file per command (commands/). Every subcommand takes --help; unknown flags and
// extra arguments exit 2 with its usage; list, ops, check and run take --json.
#include "cli.h"
#include "plugin_probe.h"

#include <backplane/registry.h>
#include <backplane/selection.h>
#include <backplane/selection_file.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace backplane::cli {
namespace {

constexpr const char* kCommonFlags = R"(common flags:
  --backends a,b     load exactly these (default: $BACKPLANE_BACKENDS, else every plugin found;
                     "none" loads none)
  --plugin-path DIRS more plugin directories (a colon list), searched after the installed
                     plugins and before $BACKPLANE_PLUGIN_PATH (--plugin-dir: the same)
  --prefer SPEC      which plugin serves an op where two serve one device:
                     "rms_norm:cpu_alt,cpu;*:cpu" (as $BACKPLANE_PREFER)
  --selection FILE   the same by call size, from a selection file (`backplane tune` writes one;
                     as $BACKPLANE_SELECTION); a --prefer for an op overrides it; a bucket
                     naming a plugin that is not loaded is a warning
  --strict           with --selection: such a file is refused instead (exit 1; not bench, tune)
  -h, --help         this help
)";

constexpr const char* kUsage = R"(usage: backplane <command> [flags]

commands:
  list    every plugin on the search path, each loaded if it can be: status, dispatch key,
          version, ops, and the path or the reason it failed
  ops     the coverage table: each registry op on each backend (dtypes measured by calling
          it), and which plugin serves each op where two serve one device
  check   [BACKEND...] the conformance suite (every op against its PyTorch reference) on each
          backend (or those named)
  run     MODEL.pt2 --input MODEL.io.pt: run an AOTInductor package with no Python, check it
          against the reference saved at export, report latency
  new-backend NAME --dispatch-key KEY [--stable-abi] | --triton: write a plugin project out of this tree
  bench   every op on each backend beside PyTorch and copy_ (Google Benchmark); --compare, --plot
  tune    --backends a,b: time each plugin serving an op on one device, by size; write a selection file

`backplane <command> --help` shows a command's flags.

exit codes:
  0  success
  1  a check, a run or a named backend failed
  2  bad command line (unknown command or flag, missing value, extra argument)
)";

struct Command {
  const char* usage;                // first help line
  const char* summary;              // what it does
  std::vector<std::string> flags;   // its own flags besides the common ones
  std::vector<std::string> valued;  // those that take a value
  bool positional = false;          // takes positional arguments (run: the package)
  std::function<int(const Options&)> run;
};

std::vector<std::string> split(const std::string& list) { return detail::split_nonempty(list, ','); }

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> all = {
      {"list", {"backplane list [--json] [common flags]", "Every plugin on the search path, loaded if it can be.", {"--json"}, {}, false, list_command}},
      {"ops", {"backplane ops [--json] [common flags]", "The coverage table op x backend, and which plugin serves each op.", {"--json"}, {}, false, ops_command}},
      {"check",
       {"backplane check [BACKEND...] [--ops a,b] [-v] [--allow-missing-device] [--no-gradients] [--json] [common flags]",
        "The conformance suite on each backend: one line per op; an op a backend lacks is 'not implemented on "
        "BACKEND'.\nExits 1 when a check fails, when a backend named (as an argument, --backends or\n"
        "$BACKPLANE_BACKENDS) has no device here, or when nothing was checked.\n"
        "  --ops a,b                only these ops\n"
        "  -v                       every failure in full (dispatcher detail included)\n"
        "  --allow-missing-device   a backend with no device here is listed as not checked, and the\n"
        "                           exit code ignores it (CI on a machine without the device)\n"
        "  --no-gradients           leave out the gradient cases (each `backward:` formula against\n"
        "                           autograd through the op's reference)",
        {"--json", "-v", "--ops", "--allow-missing-device", "--no-gradients"}, {"--ops"}, true, check_command}},
      {"new-backend",
       {"backplane new-backend NAME --dispatch-key {CPU,CUDA,PrivateUse1} [--stable-abi [--torch-target X.Y]] "
        "[--without PART,...] [--dir DIR]\n       backplane new-backend NAME --triton [--dir DIR]",
        "Write a plugin project for a new backend, built out of this tree against an installed Backplane:\n"
        "CMakeLists.txt (find_package(Backplane)), one kernel stub per registry op (none registered, so every\n"
        "op starts 'not implemented'), a README, a conformance test and a pyproject.toml for its own wheel.\n"
        "  --dispatch-key KEY   CPU, CUDA, or PrivateUse1 (a new device: also a running device layer over an\n"
        "                       emulated driver, from Backplane's npu device, renamed)\n"
        "  --stable-abi         kernels on PyTorch's stable ABI (CPU or CUDA): one binary for torch X.Y and\n"
        "                       every later release; mul written as the worked example\n"
        "  --torch-target X.Y   the oldest torch it runs under (default: this Backplane's torch)\n"
        "  --triton             a Python package of Triton kernels instead (kind triton, CUDA): add written\n"
        "                       as the worked example, the other ops unregistered stubs; no --dispatch-key\n"
        "  --without PART,...   PrivateUse1: leave optional parts of the device out (compile, profiler,\n"
        "                       collectives; repeatable)\n"
        "  --dir DIR            where to write it (default: ./NAME; must be empty or absent)",
        {"--dispatch-key", "--dir", "--stable-abi", "--torch-target", "--triton", "--without"},
        {"--dispatch-key", "--dir", "--torch-target", "--without"},
        true, new_backend_command}},
      {"run",
       {"backplane run MODEL.pt2 --input MODEL.io.pt [--repeat N] [--allow-plugin-change] [--json] [common flags]",
        "Run an AOTInductor package from C++ with no Python, check it against the saved reference, report latency.\n"
        "Each input is checked against the layout the package was compiled for (other strides are copied, other\n"
        "sizes, dtypes or devices refused). The plugin serving each backplane op is compared with the one the\n"
        "package was made with: another is refused unless --allow-plugin-change.\n"
        "  --input FILE            the reference file the pipeline's export step wrote\n"
        "  --repeat N              timed runs per case, 1 to 100000 (default 20)\n"
        "  --allow-plugin-change   run although another plugin serves an op than at packaging",
        {"--input", "--repeat", "--allow-plugin-change", "--json"}, {"--input", "--repeat"}, true, run_command}},
      {"bench",
       {"backplane bench [--ops a,b] [--dtypes ..] [--shapes ..|all] [--repetitions N] [--json F] [--compare BASE.json] "
        "[--compare-backends A,B] [--threshold PCT] [--plot F.png] [--side-by-side] [--min-time S] [--max-time S] "
        "[--interleave] [--cuda-graph] [--backward] [--compile|--no-compile] [common flags]",
        "Benchmark every registry op (or those named) on each backend, beside PyTorch's op and the device's copy_\n"
        "bandwidth, each row checked against its reference first (engine: backplane_bench, on Google Benchmark).\n"
        "By default each op's first bench preset in float32 and bfloat16, each row sampled until its spread is\n"
        "below 2% (at least --min-time, at most --max-time); the reference and copy_ rows once per device.\n"
        "A progress line on a terminal, then one table; a warning when the run's copy_ rows disagree (busy machine).\n"
        "  --ops a,b              these ops (default: all)\n"
        "  --dtypes a,b           float32, float64, float16, bfloat16 (default: float32,bfloat16)\n"
        "  --shapes a,b|all       the registry's bench presets by name, or all: the full sweep (default: each\n"
        "                         op's first)\n"
        "  --repetitions N        repetitions of each row, 1 to 1000 (default 1; 5 with --compare and\n"
        "                         --compare-backends, whose U test needs 3): median and spread over them\n"
        "  --min-time SECONDS     least time each row samples, above 0 and at most 3600 (default 0.05)\n"
        "  --max-time SECONDS     most time each row samples, at least --min-time (default 0.5)\n"
        "  --interleave           the repetitions of all rows in a random order (Google Benchmark's random\n"
        "                         interleaving): a drift of the machine's speed falls on every row alike\n"
        "  --cuda-graph           time cuda rows as replays of a CUDA graph of each batch of calls: the kernels'\n"
        "                         time without the host's launch cost (ops shorter than a launch need it)\n"
        "  --backward             time forward+backward of every op with a `backward:` (autograd through the\n"
        "                         registry's formulas; the reference: PyTorch's op under autograd)\n"
        "  --compile, --no-compile  torch.compile of each op's reference as a column (x compile): on by default\n"
        "                         where a selected backend runs on CUDA; --compile on any device (runs Python)\n"
        "  --mode eager|compile   compile: also the selected implementation's rows under torch.compile (the\n"
        "                         selection file in force decides: a plugin, or Inductor's code; runs Python)\n"
        "  --cold-l2              flush the GPU's L2 cache before each sample (nvbench's cold mode; cuda rows)\n"
        "  --json FILE            the run's JSON (Google Benchmark's; the baseline formulas are its labels)\n"
        "  --compare BASE.json    against an earlier run: per row, change and Mann-Whitney U p; exit 1 on a\n"
        "                         significant regression beyond --threshold (default 5%)\n"
        "  --compare-backends A,B backend B against A in this run, the same way\n"
        "  --plot FILE.png        GB/s per op and backend with the copy_ roofline (matplotlib)\n"
        "  --side-by-side         markdown: a row per op, preset and dtype, a group of columns per backend\n"
        "  (--compare, --compare-backends, --plot and --side-by-side run `python -m backplane bench`, as do\n"
        "   plugins of kind triton: the engine times the library backends, Python the triton rows beside them;\n"
        "   `python -m backplane bench --input a.json b.json --side-by-side` puts runs of other backends together)",
        {"--ops", "--dtypes", "--shapes", "--repetitions", "--min-time", "--max-time", "--json", "--compare",
         "--compare-backends", "--threshold", "--plot", "--side-by-side", "--interleave", "--cuda-graph", "--backward",
         "--compile", "--no-compile", "--cold-l2", "--mode"},
        {"--ops", "--dtypes", "--shapes", "--repetitions", "--min-time", "--max-time", "--json", "--compare",
         "--compare-backends", "--threshold", "--plot", "--mode"},
        false, bench_command}},
      {"tune",
       {"backplane tune --backends a[,b..] [--mode eager|graph|compile] [--ops a,b] [--shapes all|a,b] [--dtypes ..] "
        "[--margin PCT] [--alpha P] [--repetitions N] [--out FILE] [--min-time S] [--max-time S] [--cuda-graph] "
        "[--json F | --from-json F] [common flags]",
        "For each op two or more of the named plugins serve on one device (in compile mode: one plugin and\n"
        "Inductor's code for the op's reference), time each candidate over the\n"
        "registry's bench presets and write a selection file: per op, size ranges -> plugin, with the figures\n"
        "that decided them (docs/selection.md). Apply it with --selection FILE, BACKPLANE_SELECTION=FILE or\n"
        "backplane.load(..., selection=FILE). Runs `python -m backplane tune`.\n"
        "  --backends a,b         the plugins to choose among, in load order: the first serving an op keeps a\n"
        "                         size unless another is faster by more than --margin\n"
        "  --shapes all|a,b       the bench presets timed (default: all)\n"
        "  --dtypes a,b           (default: float32); a size is decided over every dtype timed\n"
        "  --mode eager|graph|compile  time as the deployment runs: eager calls, CUDA-graph replays, or compiled\n"
        "                         between a producer and a consumer op, with `inductor` a candidate (default eager)\n"
        "  --margin PCT           how much faster another plugin must be to take a size (default 5)\n"
        "  --alpha P              and significantly so: one-sided Mann-Whitney U over the repetitions (default 0.05)\n"
        "  --repetitions N        repetitions of each candidate (default 3; 5 in compile mode)\n"
        "  --out FILE             the selection file (default: backplane_selection.yaml)\n"
        "  --json FILE            also keep the engine's JSON\n"
        "  --from-json FILE       decide from an earlier run's JSON (--json here, or bench --json) instead of\n"
        "                         timing: another --margin, or figures taken on the machine that will serve",
        {"--ops", "--shapes", "--dtypes", "--margin", "--out", "--min-time", "--max-time", "--cuda-graph", "--json",
         "--from-json", "--mode", "--alpha", "--repetitions"},
        {"--ops", "--shapes", "--dtypes", "--margin", "--out", "--min-time", "--max-time", "--json", "--from-json",
         "--mode", "--alpha", "--repetitions"},
        false, tune_command}},
  };
  return all;
}

void print_help(const Command& c, std::ostream& out) {
  out << "usage: " << c.usage << "\n\n" << c.summary << "\n\n" << kCommonFlags;
}

}  // namespace
}  // namespace backplane::cli

int main(int argc, char** argv) {
  using namespace backplane::cli;
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "__probe" && argc == 4) probe_command(argv[2], argv[3]);  // the child of probe_in_child
  if (name == "__probe_in_child" && argc == 4) return probe_verdict_command(argv[2], argv[3]);  // for Python
  if (name == "-h" || name == "--help" || name == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "backplane: unknown command '" << name << "'\n\n" << kUsage;
    return kExitUsage;
  }
  const Command& command = it->second;
  auto usage_error = [&](const std::string& what) {
    std::cerr << "backplane " << name << ": " << what << "\n\n";
    print_help(command, std::cerr);
    return kExitUsage;
  };
  Options options;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help(command, std::cout);
      return kExitOk;
    }
    const bool common_valued =
        arg == "--backends" || arg == "--plugin-path" || arg == "--plugin-dir" || arg == "--prefer" ||
        arg == "--selection";
    const bool own = std::count(command.flags.begin(), command.flags.end(), arg) > 0;
    const bool own_valued = std::count(command.valued.begin(), command.valued.end(), arg) > 0;
    if ((common_valued || own_valued) && i + 1 >= argc) return usage_error(arg + " needs a value");
    if (arg == "--backends") {
      const std::string value = argv[++i];
      try {
        options.backends = backplane::backend_names(value, "--backends '" + value + "'", "");
      } catch (const std::invalid_argument& e) {
        return usage_error(e.what());
      }
    } else if (arg == "--plugin-path" || arg == "--plugin-dir") {
      const std::string value = argv[++i];
      options.load.dir = options.load.dir ? *options.load.dir + ":" + value : value;
    } else if (arg == "--prefer") {
      try {
        backplane::prefer_from_string(argv[++i]);
      } catch (const std::exception& e) {
        return usage_error(std::string("--prefer: ") + e.what());
      }
    } else if (arg == "--selection") {
      const std::string file = std::filesystem::absolute(argv[++i]).string();
      try {
        backplane::apply_selection_file(file);  // nothing is loaded yet: checked again once loaded
      } catch (const std::exception& e) {
        return usage_error(std::string("--selection: ") + e.what());
      }
      options.selection = file;
      setenv("BACKPLANE_SELECTION", file.c_str(), 1);  // and for the programs bench and tune run
    } else if (arg == "--strict") {
      options.strict = true;
    } else if (own && arg == "--json" && !own_valued) {
      options.json = true;
    } else if (own && arg == "-v") {
      options.verbose = true;
    } else if (own && arg == "--ops") {
      options.ops = split(argv[++i]);
      for (const auto& op : options.ops)  // a plugin's own op (ns::name) is known once it loads: checked then
        if (!backplane::find_op_def(op) && op.find("::") == std::string::npos)
          return usage_error("--ops: the registry has no op '" + op + "'");
    } else if (own) {  // the subcommand's own flags (run): passed on with their value
      options.rest.push_back(arg);
      if (own_valued) options.rest.push_back(argv[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown flag '" + arg + "'");
    } else if (command.positional) {
      options.rest.push_back(arg);
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (options.strict && !options.selection) return usage_error("--strict checks a --selection file; none was given");
  if (options.strict && (name == "bench" || name == "tune"))  // their programs read BACKPLANE_SELECTION alone
    return usage_error("--strict: " + name + " applies --selection in the programs it runs, which cannot check it; "
                       "check the file with `backplane ops --backends ... --selection FILE --strict`");
  if (name == "check") {  // `backplane check acme`: as --backends acme; its flags stay in rest
    std::vector<std::string> named, flags;
    for (auto& arg : options.rest) (arg[0] == '-' ? flags : named).push_back(arg);
    if (!named.empty()) {
      if (options.backends) return usage_error("name backends either as arguments or with --backends, not both");
      options.backends = named;
    }
    options.rest = flags;
  }
  try {
    return command.run(options);
  } catch (const backplane::BackendError& e) {
    std::cerr << "backplane " << name << ": " << e.what() << "\n";
    return kExitFailed;
  } catch (const c10::Error& e) {  // a bad package or input file, as torch reports it
    std::cerr << "backplane " << name << ": " << e.what_without_backtrace() << "\n";
    return kExitFailed;
  } catch (const std::exception& e) {
    std::cerr << "backplane " << name << ": " << e.what() << "\n";
    return kExitFailed;
  }
}
