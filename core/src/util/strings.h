// The few string helpers the core's messages and lists need, in one place. Internal to
// the core (core/src is not on a host program's include path). Byte strings: no locale,
// no Unicode awareness; trimming knows only spaces and tabs.
#pragma once

#include <string>
#include <vector>

namespace backplane::detail {

// "a, b, c" (or with `sep` between the items); "" for none. Any container of strings.
template <typename Strings>
std::string join(const Strings& items, const char* sep = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    out += item;
    first = false;
  }
  return out;
}

// The pieces of `text` between each `sep`, as written: "a,,b" keeps its empty piece, and
// "" is one empty piece. Callers that want empties gone say so (split_nonempty).
inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  for (auto at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
    out.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  out.push_back(text.substr(start));
  return out;
}

// split without its empty pieces: "a,,b" is {a, b}, "" is {}.
inline std::vector<std::string> split_nonempty(const std::string& text, char sep) {
  std::vector<std::string> out;
  for (auto& piece : split(text, sep))
    if (!piece.empty()) out.push_back(std::move(piece));
  return out;
}

// `s` without leading and trailing spaces and tabs.
inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace backplane::detail
