// libFuzzer: selection files (selection_file.h). read_selection_file takes a path (a
// deployer names a file), so each input is written to one scratch file, and the regular-
// file reader the manifests share is fuzzed with the parser. Only std::invalid_argument
// may come out.
#include <backplane/selection_file.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace {
// The scratch file, removed when the fuzzer exits normally (libFuzzer calls exit(), which
// runs this destructor); a crash keeps it, next to the crash's input.
struct ScratchFile {
  std::string path = "/tmp/backplane_fuzz_selection_" + std::to_string(getpid()) + ".yaml";
  ~ScratchFile() { std::remove(path.c_str()); }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchFile scratch;
  const std::string& path = scratch.path;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    backplane::read_selection_file(path);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
