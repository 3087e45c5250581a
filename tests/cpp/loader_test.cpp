// The plugin loader. Each test runs in its own process (gtest_discover_tests), since
// a loaded plugin stays loaded.
#include <backplane/loader.h>
#include "plugins/manifest.h"
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>
#include <backplane/selection.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <ftw.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <mutex>
#include <thread>

namespace fs = std::filesystem;

namespace backplane {
namespace {

// A crash in one of these per-process tests prints where it happened (ctest shows only
// "SegFault" otherwise, and the GPU machine has no debugger): the faulting address,
// the instruction pointer and the return address on the stack, each named by dladdr,
// then the unwound stack.
void name_address(const char* what, void* address) {
  Dl_info info{};
  char line[512];
  const bool known = address != nullptr && dladdr(address, &info) != 0;
  const int n = std::snprintf(line, sizeof(line), "%s %p in %s (%s)\n", what, address,
                              known && info.dli_fname ? info.dli_fname : "?", known && info.dli_sname ? info.dli_sname : "?");
  (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
}

void print_stack_and_die(int sig, siginfo_t* info, void* context) {
  const char header[] = "\n*** fatal signal in loader test\n";
  (void)!write(STDERR_FILENO, header, sizeof(header) - 1);
  const auto* uc = static_cast<const ucontext_t*>(context);
  name_address("fault address", info->si_addr);
#if defined(__x86_64__)
  name_address("instruction  ", reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]));
  name_address("return to    ", *reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]));
#endif
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool install_crash_report() {
  struct sigaction action {};
  action.sa_sigaction = print_stack_and_die;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGABRT, &action, nullptr);
  return true;
}
const bool kCrashReport = install_crash_report();

const std::string kPlugins = BACKPLANE_PLUGIN_DIR;
const std::string kFixtures = BACKPLANE_FIXTURE_DIR;

LoadOptions in(const std::string& dir) {
  LoadOptions o;
  o.dir = dir;
  return o;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/backplane_loader_XXXXXX";
    const char* made = mkdtemp(tmpl);
    if (made == nullptr) throw std::runtime_error(std::string("mkdtemp failed: ") + std::strerror(errno));
    path_ = made;
  }
  // Not fs::remove_all: torch 2.11's libtorch.so exports its own std::filesystem::remove_all,
  // which the dynamic linker binds this call to, and on the GPU machine it jumped to a null
  // address (torch 2.11.0+cu130). nftw is plain libc.
  ~TempDir() {
    nftw(path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
         FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }
  // Copies a plugin file in under the name of `as`, with a manifest that `edit` may change.
  void add_plugin(const std::string& from_dir, const std::string& name, const std::string& as,
                  const std::function<void(Manifest&)>& edit = nullptr, bool with_manifest = true) const {
    fs::copy_file(fs::path(from_dir) / plugin_file_name(name), fs::path(path_) / plugin_file_name(as));
    if (!with_manifest) return;
    Manifest m = read_manifest((fs::path(from_dir) / manifest_file_name(name)).string());
    m.name = as;
    if (edit) edit(m);
    std::ofstream(fs::path(path_) / manifest_file_name(as)) << manifest_to_yaml(m);
  }

 private:
  std::string path_;
};

bool has_kernel(const std::string& op, c10::DispatchKey key) {
  auto h = c10::Dispatcher::singleton().findOp(c10::OperatorName("backplane::" + op, ""));
  return h && h->hasKernelForDispatchKey(key);
}

std::string load_error(const std::string& name, const LoadOptions& options = {}) {
  try {
    load(name, options);
  } catch (const BackendError& e) {
    return e.what();
  }
  return "(no error)";
}

at::Tensor identity(const at::Tensor& x) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("backplane::identity_conv", "").typed<at::Tensor(const at::Tensor&)>();
  return op.call(x);
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' does not contain '" << part << "'";
}

TEST(Loader, LoadsCpuByName) {
  ASSERT_FALSE(has_kernel("add", c10::DispatchKey::CPU));
  const BackendRecord r = load("cpu");
  EXPECT_EQ(r.status, BackendStatus::Loaded);
  EXPECT_EQ(r.dispatch_key, "CPU");
  EXPECT_EQ(r.version, core_version());
  EXPECT_EQ(r.path, fs::canonical(kPlugins + "/libbackplane_cpu.so").string());
  EXPECT_EQ(r.ops, read_manifest(kPlugins + "/libbackplane_cpu.manifest.yaml").ops);
  EXPECT_TRUE(has_kernel("add", c10::DispatchKey::CPU));
  at::Tensor x = at::randn({5});
  auto id = c10::Dispatcher::singleton().findSchemaOrThrow("backplane::identity_conv", "").typed<at::Tensor(const at::Tensor&)>();
  EXPECT_TRUE(id.call(x).equal(x));
}

TEST(Loader, LoadingTwiceIsHarmless) {
  const BackendRecord first = load("cpu");
  const BackendRecord second = load("cpu", in(kPlugins));
  EXPECT_EQ(first.path, second.path);
  int cpu_records = 0;
  for (const auto& r : backends()) cpu_records += r.name == "cpu";
  EXPECT_EQ(cpu_records, 1);
}

TEST(Loader, ConcurrentLoadsLoadOnce) {
  std::vector<std::thread> threads;
  std::vector<BackendRecord> records(8);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { records[i] = load("cpu"); });
  for (auto& t : threads) t.join();
  for (const auto& r : records) {
    EXPECT_EQ(r.status, BackendStatus::Loaded);
    EXPECT_EQ(r.path, records[0].path);
  }
  // A second registration of the same kernels would have been refused or warned;
  // the dispatcher holds exactly one CPU kernel per op.
  EXPECT_TRUE(has_kernel("rms_norm", c10::DispatchKey::CPU));
}

TEST(Loader, UnknownNameSaysWhereItLooked) {
  const std::string err = load_error("nosuch");
  expect_contains(err, "backend 'nosuch' not found: looked for libbackplane_nosuch.so in [");
  expect_contains(err, kPlugins);
  expect_contains(err, "found plugins: cpu");
  expect_contains(err, "Set BACKPLANE_PLUGIN_PATH or pass a directory.");
}

TEST(Loader, RefusesNamesThatAreNotIdentifiers) {
  for (const std::string bad : {"../cpu", "a/b", "cpu.so", "", "..", "/abs/path", "core", "9lives"})
    expect_contains(load_error(bad), "invalid backend name '" + bad + "': expected a plain identifier");
  EXPECT_TRUE(is_valid_backend_name("npu_2"));
}

TEST(Loader, SearchPathOrder) {
  setenv("BACKPLANE_PLUGIN_PATH", "/first:/second::", 1);
  const auto dirs = plugin_search_path(in("/explicit:/more"));
  ASSERT_EQ(dirs.size(), 5u);
  // Installed plugins first: an added directory can add a backend, never replace one.
  EXPECT_EQ(fs::canonical(dirs[0]), fs::canonical(kPlugins));
  EXPECT_EQ(dirs[1], "/explicit");
  EXPECT_EQ(dirs[2], "/more");
  EXPECT_EQ(dirs[3], "/first");
  EXPECT_EQ(dirs[4], "/second");
  unsetenv("BACKPLANE_PLUGIN_PATH");
}

TEST(Loader, PluginPathFromEnvironment) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "envcpu");
  setenv("BACKPLANE_PLUGIN_PATH", dir.path().c_str(), 1);
  EXPECT_EQ(load("envcpu").status, BackendStatus::Loaded);
  unsetenv("BACKPLANE_PLUGIN_PATH");
}

TEST(Loader, AnAddedDirectoryNeverReplacesAnInstalledPlugin) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "cpu");  // a second libbackplane_cpu.so
  EXPECT_EQ(fs::canonical(load("cpu", in(dir.path())).path), fs::canonical(std::string(kPlugins) + "/libbackplane_cpu.so"));
}

TEST(Loader, ASecondPrivateUse1DeviceIsRefusedBeforeOpening) {
  // PyTorch has one PrivateUse1 device per process; a second plugin would override the
  // first one's aten kernels and abort on its fallback registration.
  EXPECT_EQ(load("npu").status, BackendStatus::Loaded);
  TempDir dir;
  dir.add_plugin(kPlugins, "npu", "otherdev");
  const std::string err = load_error("otherdev", in(dir.path()));
  expect_contains(err, "backend 'otherdev' rejected (");
  expect_contains(err, "PrivateUse1 already belongs to backend 'npu' (");
  expect_contains(err, "load only one of 'npu' and 'otherdev'");
}

TEST(Loader, PluginWithoutManifestIsRejectedUnopened) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "bare", nullptr, /*with_manifest=*/false);
  const std::string err = load_error("bare", in(dir.path()));
  expect_contains(err, "backend 'bare' rejected (");
  expect_contains(err, "no manifest " + dir.path() + "/libbackplane_bare.manifest.yaml beside the plugin");
  EXPECT_FALSE(has_kernel("add", c10::DispatchKey::CPU)) << "a rejected plugin was opened";
}

TEST(Loader, TorchVersionMismatchIsRejectedBeforeOpening) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "oldtorch", [](Manifest& m) { m.torch_version = "2.0"; });
  const std::string err = load_error("oldtorch", in(dir.path()));
  expect_contains(err, "backend 'oldtorch' rejected");
  expect_contains(err, "built against torch 2.0, this process runs torch " + torch_major_minor());
  EXPECT_FALSE(has_kernel("add", c10::DispatchKey::CPU)) << "a rejected plugin was opened";
  bool listed = false;
  for (const auto& r : backends()) {
    if (r.name != "oldtorch") continue;
    listed = true;
    EXPECT_EQ(r.status, BackendStatus::Rejected);
  }
  EXPECT_TRUE(listed);
}

TEST(Loader, PluginAbiMismatchIsRejected) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "newabi", [](Manifest& m) { m.plugin_abi = kPluginAbi + 1; });
  expect_contains(load_error("newabi", in(dir.path())), "this core expects plugin ABI " + std::to_string(kPluginAbi));
}

TEST(Loader, ManifestNamingUnknownOpIsRejected) {
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "extra", [](Manifest& m) { m.ops.push_back("warp_drive"); });
  expect_contains(load_error("extra", in(dir.path())), "manifest lists op 'warp_drive', which the registry does not define");
}

TEST(Loader, FileThatIsNotAPluginFails) {
  TempDir dir;
  std::ofstream(dir.path() + "/libbackplane_junk.so") << "this is not an ELF file\n";
  Manifest m = read_manifest(kPlugins + "/" + manifest_file_name("cpu"));
  m.name = "junk";
  m.ops.clear();
  std::ofstream(dir.path() + "/" + manifest_file_name("junk")) << manifest_to_yaml(m);
  const std::string err = load_error("junk", in(dir.path()));
  expect_contains(err, "backend 'junk' failed (");
  expect_contains(err, "dlopen failed: ");
  expect_contains(err, "libbackplane_junk.so");
}

TEST(Loader, APluginRefusedWhileOpeningStaysFailed) {
  // Its manifest declares no op, but its library registers kernels: refused while it
  // opens. Asking again must not report it loaded (a second dlopen runs no registration).
  TempDir dir;
  dir.add_plugin(kPlugins, "cpu", "liar", [](Manifest& m) { m.ops.clear(); });
  const std::string first = load_error("liar", in(dir.path()));
  expect_contains(first, "backend 'liar' failed (");
  expect_contains(first, "registrations refused");
  const std::string second = load_error("liar", in(dir.path()));
  EXPECT_EQ(second, first);
  for (const auto& r : load_discovered(in(dir.path())))
    if (r.name == "liar") EXPECT_EQ(r.status, BackendStatus::Failed);
}

TEST(Loader, MissingDependencyNamesIt) {
  TempDir dir;
  dir.add_plugin(kFixtures, "fixture_needsdep", "fixture_needsdep");
  const std::string err = load_error("fixture_needsdep", in(dir.path()));
  expect_contains(err, "backend 'fixture_needsdep' failed");
  expect_contains(err, "libbackplane_fixture_dep.so: cannot open shared object file");
}

TEST(Loader, DirectRegistrationOnATakenKeyIsRefused) {
  load("cpu");
  const std::string err = load_error("fixture_dup", in(kFixtures));
  expect_contains(err, "backend 'fixture_dup' rejected");
  expect_contains(err, "would register backplane::identity_conv for CPU, already registered by backend 'cpu' (" +
                           fs::canonical(kPlugins + "/libbackplane_cpu.so").string() + ")");
  expect_contains(err, "it registers directly (m.impl), so it cannot share the device");
  // cpu's kernel is still the one that runs: the duplicate was never opened.
  at::Tensor x = at::randn({4});
  EXPECT_TRUE(identity(x).equal(x));
}

TEST(Loader, CorePluginAfterADirectOneIsRefusedNotSilent) {
  EXPECT_EQ(load("fixture_dup", in(kFixtures)).status, BackendStatus::Loaded);
  const std::string err = load_error("cpu");
  expect_contains(err, "backend 'cpu' failed");
  expect_contains(err, "would register backplane::identity_conv for CPU, already registered directly (m.impl)");
}

// Two plugins registering through the core serve one device; the core chooses per op.
TEST(Selection, FirstLoadedServesUntilAPreferenceSaysOtherwise) {
  load("cpu");
  EXPECT_EQ(load("cpu_alt", in(kFixtures)).status, BackendStatus::Loaded);
  const at::Tensor x = at::randn({5});
  EXPECT_EQ(serving_plugin("identity_conv", "CPU"), "cpu");
  EXPECT_TRUE(identity(x).equal(x));
  prefer("identity_conv", {"cpu_alt"});
  EXPECT_EQ(serving_plugin("identity_conv", "CPU"), "cpu_alt");
  EXPECT_TRUE(identity(x).equal(-x)) << "cpu_alt's kernel (-x) should serve now";
  {
    const ScopedPreference back("identity_conv", {"cpu"});
    EXPECT_TRUE(identity(x).equal(x));
  }
  EXPECT_TRUE(identity(x).equal(-x)) << "the scope must restore the earlier preference";
  prefer("identity_conv", {});
  EXPECT_TRUE(identity(x).equal(x));
  // Ops only cpu offers are untouched, whatever the preference.
  prefer("*", {"cpu_alt"});
  EXPECT_EQ(serving_plugin("mul", "CPU"), "cpu");
  EXPECT_EQ(serving_plugin("identity_conv", "CPU"), "cpu_alt");
}

TEST(Selection, ConflictsAreListedWithTheirReason) {
  load("cpu");
  load("cpu_alt", in(kFixtures));
  int found = 0;
  for (const auto& r : serving()) {
    if (r.op != "identity_conv" && r.op != "add") {  // cpu_alt's two ops
      EXPECT_EQ(r.offered_by.size(), 1u) << r.op;
      EXPECT_EQ(r.why, "only offer");
      continue;
    }
    ++found;
    EXPECT_EQ(r.dispatch_key, "CPU");
    EXPECT_EQ(r.offered_by, (std::vector<std::string>{"cpu", "cpu_alt"}));
    EXPECT_EQ(r.why, "loaded first");
  }
  EXPECT_EQ(found, 2);
}

TEST(Selection, PreferenceBeforeLoadingApplies) {
  prefer_from_string("identity_conv:cpu_alt,cpu");
  load("cpu");
  load("cpu_alt", in(kFixtures));
  const at::Tensor x = at::randn({3});
  EXPECT_TRUE(identity(x).equal(-x));
  EXPECT_EQ(preferences_string(), "identity_conv:cpu_alt,cpu");
}

TEST(Selection, BadPreferencesNameWhatIsWrong) {
  EXPECT_THROW(prefer("nosuch_op", {"cpu"}), std::invalid_argument);
  try {
    prefer_from_string("identity_conv");
  } catch (const std::invalid_argument& e) {
    expect_contains(e.what(), "expected op:plugin[,plugin...]");
  }
  try {
    prefer("add", {"../x"});
  } catch (const std::invalid_argument& e) {
    expect_contains(e.what(), "'../x' is not a plugin name");
  }
}

TEST(Loader, SecondCopyFromAnotherPathIsRefused) {
  TempDir first, second;
  first.add_plugin(kPlugins, "cpu", "twin");
  second.add_plugin(kPlugins, "cpu", "twin");
  EXPECT_EQ(load("twin", in(first.path())).status, BackendStatus::Loaded);
  expect_contains(load_error("twin", in(second.path() + ":" + first.path())), "backend 'twin' is already loaded from ");
}

TEST(Loader, DiscoveryRecordsBrokenPluginsAndLoadsTheRest) {
  TempDir dir;
  std::ofstream(dir.path() + "/libbackplane_junk.so") << "not ELF";
  dir.add_plugin(kPlugins, "cpu", "stale", [](Manifest& m) { m.torch_version = "1.13"; });
  const auto records = load_discovered(in(dir.path()));
  std::map<std::string, BackendRecord> by_name;
  for (const auto& r : records) by_name[r.name] = r;
  ASSERT_EQ(by_name.count("cpu"), 1u);
  EXPECT_EQ(by_name["cpu"].status, BackendStatus::Loaded);
  EXPECT_EQ(by_name["junk"].status, BackendStatus::Rejected);
  expect_contains(by_name["junk"].reason, "no manifest");
  EXPECT_EQ(by_name["stale"].status, BackendStatus::Rejected);
  expect_contains(by_name["stale"].reason, "built against torch 1.13");
}

// A manifest with no library beside it: kind triton is a Python package, which this
// process (no Python bridge, as in the C++ command) lists and refuses as unavailable; a
// lone manifest of kind shared_library is a library gone missing.
TEST(Loader, LoneManifestsAreTritonPluginsOrMissingLibraries) {
  TempDir dir;
  std::ofstream(dir.path() + "/" + manifest_file_name("tk"))
      << "backplane_plugin_abi: 1\nname: tk\nversion: \"0.1\"\nkind: triton\ndispatch_key: CUDA\n"
         "python_module: backplane_tk\nops: [add]\ntriton: \">=3.0\"\ntorch: \">=2.0\"\n";
  Manifest gone = read_manifest(kPlugins + "/" + manifest_file_name("cpu"));
  gone.name = "gone";
  std::ofstream(dir.path() + "/" + manifest_file_name("gone")) << manifest_to_yaml(gone);
  std::map<std::string, BackendRecord> by_name;
  for (const auto& r : backends(in(dir.path()))) by_name[r.name] = r;
  ASSERT_EQ(by_name.count("tk"), 1u);
  EXPECT_EQ(by_name["tk"].status, BackendStatus::Unavailable);
  EXPECT_EQ(by_name["tk"].kind, "triton");
  EXPECT_EQ(by_name["tk"].path, dir.path() + "/" + manifest_file_name("tk"));
  expect_contains(by_name["tk"].reason, "its kernels are Python launchers from package 'backplane_tk'");
  expect_contains(by_name["tk"].reason, "this process has no Python bridge");
  ASSERT_EQ(by_name.count("gone"), 1u);
  EXPECT_EQ(by_name["gone"].status, BackendStatus::Rejected);
  expect_contains(by_name["gone"].reason, "no plugin library " + dir.path() + "/libbackplane_gone.so beside its manifest");
  try {
    load("tk", in(dir.path()));
    FAIL() << "loaded";
  } catch (const BackendError& e) {
    expect_contains(e.what(), "backend 'tk' unavailable (");
    expect_contains(e.what(), "this process has no Python bridge");
  }
}

TEST(Loader, ListingDoesNotOpenPlugins) {
  const auto records = backends();
  bool saw_cpu = false;
  for (const auto& r : records)
    if (r.name == "cpu") {
      saw_cpu = true;
      EXPECT_EQ(r.status, BackendStatus::Available);
      EXPECT_EQ(r.ops, read_manifest(kPlugins + "/libbackplane_cpu.manifest.yaml").ops);
    }
  EXPECT_TRUE(saw_cpu);
  EXPECT_FALSE(has_kernel("add", c10::DispatchKey::CPU));
}

}  // namespace
}  // namespace backplane

namespace backplane {
namespace {

// 16 threads at once load plugins (cpu, and acme, whose fragment defines ops while the
// others read the op list), list backends and ops, and call ops through the dispatcher.
// Every call must give the right numbers and nothing may throw, hang or crash; run under
// TSan in CI (scripts/sanitizers.sh) it also must show no data race in Backplane's code.
TEST(LoaderStress, SixteenThreadsLoadListAndCall) {
  constexpr int kThreads = 16, kRounds = 40;
  std::atomic<int> failures{0};
  std::mutex first_failure_mutex;
  std::string first_failure;
  auto fail = [&](const std::string& why) {
    if (failures++ == 0) {
      std::lock_guard<std::mutex> lock(first_failure_mutex);
      first_failure = why;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const auto add = c10::Dispatcher::singleton().findSchemaOrThrow("backplane::add", "").typed<at::Tensor(
            const at::Tensor&, const at::Tensor&, const at::Scalar&)>();
        for (int round = 0; round < kRounds; ++round) {
          load("cpu", in(kPlugins));
          if (t % 4 == 0) load("acme", in(kFixtures));
          if (backends(in(kFixtures)).empty()) fail("backends() listed nothing");
          for (const OpDef& op : all_ops())
            if (find_op_def(op.id()) != &op) fail("find_op_def(" + op.id() + ") is not the listed op");
          const at::Tensor a = at::full({64}, double(t)), b = at::full({64}, double(round));
          if (!at::equal(add.call(a, b, 2), at::full({64}, double(t + 2 * round)))) fail("add gave a wrong result");
          // Only where this thread's own load of acme returned: while another thread is
          // still opening it, its op is defined (the fragment comes first) but may have
          // no kernel yet (seen under ASan, which widens that window).
          if (const OpDef* gelu = t % 4 == 0 ? find_op_def("acme::fused_gelu") : nullptr) {
            const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(gelu->qualified_name().c_str(), "");
            const at::Tensor x = at::full({8}, 1.0);
            if (!at::allclose(handle.typed<at::Tensor(const at::Tensor&)>().call(x), at::gelu(x)))
              fail("acme::fused_gelu gave a wrong result");
          }
          (void)serving();
        }
      } catch (const std::exception& e) {
        fail(std::string("threw: ") + e.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_NE(find_op_def("acme::fused_gelu"), nullptr);
}

}  // namespace
}  // namespace backplane
