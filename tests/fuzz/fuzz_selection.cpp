// libFuzzer: selection files (selection_file.h). read_selection_file takes a path (a
// deployer names a file), so each input is written to one scratch file, and the regular-
// file reader the manifests share is fuzzed with the parser. Only std::invalid_argument
// may come out.
#include <backplane/selection_file.h>

#include "scratch_file.h"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const backplane::fuzz::ScratchFile scratch("selection");
  if (!scratch.write(data, size)) return 0;
  try {
    backplane::read_selection_file(scratch.path);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
