// SHA-256 (FIPS 180-4) of a file: what a selection file records of each plugin it names,
// compared as it is applied. Python's hashlib computes the same digest.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace backplane::detail {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);
// The hex digest of a regular file's bytes, read in blocks; nullopt for one that cannot be
// read or is not a regular file (a FIFO would block).
std::optional<std::string> sha256_of_file(const std::string& path);

}  // namespace backplane::detail
