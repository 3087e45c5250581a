// libFuzzer: plugin manifests. read_manifest takes a path (the loader reads files),
// so each input is written to one scratch file. Only std::runtime_error may come out.
#include <backplane/manifest.h>

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
  std::string path = "/tmp/backplane_fuzz_manifest_" + std::to_string(getpid()) + ".yaml";
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
    backplane::read_manifest(path);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
