// A minimal JSON writer for the records the C API hands to Python. Writes only
// what it is given; no parsing.
#pragma once

#include <string>
#include <vector>

namespace backplane::json {

std::string quote(const std::string& text);
std::string list(const std::vector<std::string>& items);  // items are quoted

// Builds {"k": v, ...}; values are already-encoded JSON.
class Object {
 public:
  Object& raw(const std::string& key, const std::string& encoded);
  Object& str(const std::string& key, const std::string& value) { return raw(key, quote(value)); }
  std::string done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

std::string array(const std::vector<std::string>& encoded_items);

}  // namespace backplane::json

#include <backplane/loader.h>
#include <backplane/selection.h>

namespace backplane::json {

// A backend record as the C interface and `backplane list --json` give it.
std::string backend_record(const BackendRecord& r);
// Who serves an (op, key), as backplane.serving() and `backplane ops --json` give it.
std::string serving_record(const ServingRecord& s);

}  // namespace backplane::json
