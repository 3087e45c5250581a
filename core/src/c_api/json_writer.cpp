#include "c_api/json_writer.h"

#include <cstdint>
#include <cstdio>
#include <limits>

namespace backplane::json {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 where the bytes are not one.
size_t utf8_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // shorter forms are overlong
    if (lead == 0xED) hi = 0x9F;  // U+D800..U+DFFF are surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

// JSON text must be UTF-8 (RFC 8259). Strings here come from files on disk (a
// manifest, a path, an error that quotes either), which may hold any bytes: each byte
// that is not part of a well-formed sequence becomes U+FFFD, so the reader always
// gets valid JSON and sees where the damage was.
std::string quote(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(text, i);
      if (n == 0) {
        out += "\\ufffd";
      } else {
        out.append(text, i, n);
        i += n - 1;
      }
      continue;
    }
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

std::string backend_record(const BackendRecord& r) {
  return Object()
      .str("name", r.name)
      .str("status", to_string(r.status))
      .str("reason", r.reason)
      .str("path", r.path)
      .str("version", r.version)
      .str("dispatch_key", r.dispatch_key)
      .raw("ops", list(r.ops))
      .str("python_module", r.python_module)
      .str("python_path", r.python_path)
      .str("registry", r.registry)
      .str("torch_abi", r.torch_abi)
      .str("torch_target", r.torch_target)
      .str("kind", r.kind)
      .str("triton_versions", r.triton_versions)
      .done();
}

std::string serving_record(const ServingRecord& s) {
  return Object()
      .str("op", s.op)
      .str("dispatch_key", s.dispatch_key)
      .str("serving", s.serving)
      .str("why", s.why)
      .raw("offered_by", list(s.offered_by))
      .raw("buckets", size_buckets(s.buckets))
      .done();
}

std::string size_buckets(const std::vector<SizeBucket>& buckets) {
  // [{"up_to": 65536, "plugin": "cpu_alt", "dtype": ""}, {"up_to": null, ...}]: null takes every larger call
  std::vector<std::string> out;
  for (const SizeBucket& b : buckets)
    out.push_back(Object()
                      .raw("up_to", b.up_to == std::numeric_limits<std::int64_t>::max() ? "null" : std::to_string(b.up_to))
                      .str("plugin", b.plugin)
                      .str("dtype", b.dtype)
                      .done());
  return array(out);
}

std::string selection_rule(const SelectionRule& r) {
  return Object()
      .str("op", r.op)
      .str("dispatch_key", r.dispatch_key)
      .str("dtype", r.dtype)
      .str("mode", r.mode)
      .raw("buckets", size_buckets(r.buckets))
      .done();
}

}  // namespace backplane::json
