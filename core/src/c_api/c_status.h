// How every C API entry point answers (c_api.cpp, formula_tree.cpp): a status and a
// malloc'd UTF-8 string that the caller frees with backplane_c_free, and no exception
// past the C boundary. Status 0: the answer (JSON); 1: a backend error; 2: an internal
// error; 3: bad input from the caller (std::invalid_argument: a preference, an op name,
// a formula), which Python raises as ValueError.
#pragma once

#include <backplane/loader.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace backplane {

inline char* give(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

template <typename Fn>
int guarded(char** out, Fn&& fn) {
  try {
    *out = give(fn());
    return 0;
  } catch (const BackendError& e) {
    *out = give(e.what());
    return 1;
  } catch (const std::exception& e) {
    *out = give(std::string("internal error: ") + e.what());
    return 2;
  }
}

// For the entry points that take a caller's text: a bad one is status 3, not an internal error.
template <typename Fn>
int guarded_input(char** out, Fn&& fn) {
  std::optional<std::string> bad;
  const int status = guarded(out, [&]() -> std::string {
    try {
      return fn();
    } catch (const std::invalid_argument& e) {
      bad = e.what();
      return "";
    }
  });
  if (!bad) return status;
  std::free(*out);
  *out = give(*bad);
  return 3;
}

}  // namespace backplane
