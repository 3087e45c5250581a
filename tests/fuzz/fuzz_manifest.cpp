// libFuzzer: plugin manifests. read_manifest takes a path (the loader reads files),
// so each input is written to one scratch file. Only std::runtime_error may come out.
#include "plugins/manifest.h"

#include "scratch_file.h"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const backplane::fuzz::ScratchFile scratch("manifest");
  if (!scratch.write(data, size)) return 0;
  try {
    backplane::read_manifest(scratch.path);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
