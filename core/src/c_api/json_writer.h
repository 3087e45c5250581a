// A minimal JSON writer for the records the C API hands to Python and the `backplane`
// command prints with --json. Writes only what it is given; no parsing. Exported for the
// command line: compiled once, in the core.
#pragma once

#include <backplane/export.h>
#include <backplane/loader.h>
#include <backplane/selection.h>

#include <string>
#include <vector>

namespace backplane::json {

BACKPLANE_API std::string quote(const std::string& text);
BACKPLANE_API std::string list(const std::vector<std::string>& items);  // items are quoted

// Builds {"k": v, ...}; values are already-encoded JSON.
class BACKPLANE_API Object {
 public:
  Object& raw(const std::string& key, const std::string& encoded);
  Object& str(const std::string& key, const std::string& value) { return raw(key, quote(value)); }
  std::string done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

BACKPLANE_API std::string array(const std::vector<std::string>& encoded_items);

// A backend record as the C interface and `backplane list --json` give it.
BACKPLANE_API std::string backend_record(const BackendRecord& r);
// Who serves an (op, key), as backplane.serving() and `backplane ops --json` give it.
BACKPLANE_API std::string serving_record(const ServingRecord& s);
// A selection file's size buckets, and one of its rules (selection_file.h).
BACKPLANE_API std::string size_buckets(const std::vector<SizeBucket>& buckets);
BACKPLANE_API std::string selection_rule(const SelectionRule& r);

}  // namespace backplane::json
