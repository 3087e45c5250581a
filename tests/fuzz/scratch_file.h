// For harnesses whose reader takes a path (a deployer or the loader names a file): each
// input is written to one scratch file per process, which the reader then opens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace backplane::fuzz {

// The scratch file, removed when the fuzzer exits normally (libFuzzer calls exit(), which
// runs this destructor); a crash keeps it, next to the crash's input.
struct ScratchFile {
  std::string path;
  explicit ScratchFile(const std::string& reader)
      : path("/tmp/backplane_fuzz_" + reader + "_" + std::to_string(getpid()) + ".yaml") {}
  ~ScratchFile() { std::remove(path.c_str()); }

  // Writes the input; false when the file cannot be written (the input is then skipped).
  bool write(const uint8_t* data, size_t size) const {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) return false;
    std::fwrite(data, 1, size, file);
    return std::fclose(file) == 0;
  }
};

}  // namespace backplane::fuzz
