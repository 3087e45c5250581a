#include "json_writer.h"

#include <cstdio>

namespace backplane::json {

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string array(const std::vector<std::string>& encoded_items) {
  std::string out = "[";
  for (size_t i = 0; i < encoded_items.size(); ++i) out += (i ? ", " : "") + encoded_items[i];
  return out + "]";
}

std::string list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back(quote(item));
  return array(quoted);
}

Object& Object::raw(const std::string& key, const std::string& encoded) {
  body_ += (body_.empty() ? "" : ", ") + quote(key) + ": " + encoded;
  return *this;
}

}  // namespace backplane::json
