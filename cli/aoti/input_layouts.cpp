#include "aoti/input_layouts.h"

#include "util/strings.h"

#include <ATen/ops/empty_strided.h>
#include <c10/core/ScalarType.h>
#include <c10/util/StringUtil.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace backplane::cli {
namespace {

constexpr const char* kEntry = "extra/backplane_inputs.txt";
constexpr const char* kHeader = "backplane-inputs 1";
constexpr int64_t kAlignment = 16;  // bytes; Inductor assumes the compile-time alignment

using detail::split_nonempty;

// The offset of the first byte that is not part of well-formed UTF-8, or npos: the Python
// reader decodes the record strictly, and both readers must accept the same records.
size_t invalid_utf8_at(const std::string& s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = byte(i);
    size_t length = 0;  // of the sequence b starts; 0: a byte no sequence starts with
    if (b < 0x80) length = 1;
    else if (b >= 0xC2 && b <= 0xDF) length = 2;
    else if (b >= 0xE0 && b <= 0xEF) length = 3;
    else if (b >= 0xF0 && b <= 0xF4) length = 4;
    if (length == 0 || i + length > s.size()) return i;
    // The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
    const unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    for (size_t k = 1; k < length; ++k)
      if (byte(i + k) < (k == 1 ? lo : 0x80) || byte(i + k) > (k == 1 ? hi : 0xBF)) return i;
    i += length;
  }
  return std::string::npos;
}

int64_t to_int(const std::string& s) {
  size_t used = 0;
  const int64_t v = std::stoll(s, &used);
  if (used != s.size()) throw std::invalid_argument(s);
  return v;
}

InputLayout parse_line(const std::string& line, size_t index) {
  const auto words = split_nonempty(line, ' ');
  if (words.size() < 4 || words[0] != "input" || to_int(words[1]) != static_cast<int64_t>(index))
    throw std::invalid_argument(line);
  InputLayout layout;
  layout.name = words[2];
  if (words.size() == 4 && words[3] == "other") return layout;
  if (words.size() != 7 || words[5].rfind("sizes=", 0) != 0 || words[6].rfind("order=", 0) != 0)
    throw std::invalid_argument(line);
  layout.is_tensor = true;
  layout.dtype = words[3];
  layout.device = words[4];
  for (const auto& s : split_nonempty(words[5].substr(6), ',')) {
    const size_t dots = s.find("..");
    layout.sizes.push_back(dots == std::string::npos ? DimRange{to_int(s), to_int(s)}
                                                     : DimRange{to_int(s.substr(0, dots)), to_int(s.substr(dots + 2))});
  }
  for (const auto& d : split_nonempty(words[6].substr(6), ',')) layout.order.push_back(to_int(d));
  std::vector<int64_t> sorted = layout.order, all(layout.sizes.size());
  std::sort(sorted.begin(), sorted.end());
  std::iota(all.begin(), all.end(), 0);
  if (sorted != all) throw std::invalid_argument(line);
  return layout;
}

std::vector<int64_t> dense_strides(at::IntArrayRef sizes, const std::vector<int64_t>& order) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    strides[*d] = step;
    step *= std::max<int64_t>(sizes[*d], 1);
  }
  return strides;
}

std::string dtype_name(at::ScalarType t) { return std::string(c10::getDtypeNames(t).first); }

std::string describe(const InputLayout& l) {
  std::string sizes;
  for (size_t d = 0; d < l.sizes.size(); ++d)
    sizes += (d ? ", " : "") + (l.sizes[d].min == l.sizes[d].max ? std::to_string(l.sizes[d].min)
                                                                  : c10::str(l.sizes[d].min, "..", l.sizes[d].max));
  return c10::str(l.dtype, " ", l.device, " sizes (", sizes, ") dense in dimension order ", at::IntArrayRef(l.order));
}

at::Tensor to_layout(const at::Tensor& t, const std::vector<int64_t>& strides, const std::string& what, std::string& note) {
  const bool aligned = t.numel() == 0 || reinterpret_cast<uintptr_t>(t.data_ptr()) % kAlignment == 0;
  const bool same = t.strides() == at::IntArrayRef(strides);
  if (same && aligned) return t;
  note = c10::str(what, ": copied from ",
                  same ? c10::str("a data pointer not ", kAlignment, "-byte aligned") : c10::str("strides ", t.strides()),
                  " to the compiled strides ", at::IntArrayRef(strides));
  return at::empty_strided(t.sizes(), strides, t.options()).copy_(t);
}

}  // namespace

std::optional<std::vector<InputLayout>> read_input_layouts(const std::string& package) {
  caffe2::serialize::PyTorchStreamReader reader(package);
  if (!reader.hasRecord(kEntry)) return std::nullopt;
  auto [data, size] = reader.getRecord(kEntry);
  const std::string text(static_cast<const char*>(data.get()), size);
  if (const size_t at = invalid_utf8_at(text); at != std::string::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(text[at]));
    throw std::runtime_error(c10::str(package, ":", kEntry, ": expected UTF-8 text, found byte ", hex, " at offset ", at,
                                      " (line ", std::count(text.begin(), text.begin() + at, '\n') + 1, ")"));
  }
  const auto lines = split_nonempty(text, '\n');
  if (lines.empty() || lines[0] != kHeader)
    throw std::runtime_error(package + ":" + kEntry + ": expected the first line '" + kHeader + "'");
  std::vector<InputLayout> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    try {
      out.push_back(parse_line(lines[i], out.size()));
    } catch (const std::logic_error&) {  // invalid_argument, out_of_range
      throw std::runtime_error(c10::str(package, ":", kEntry, ", line ", i + 1, ": expected 'input ", out.size(),
                                        " NAME DTYPE DEVICE sizes=... order=...' or 'input ", out.size(),
                                        " NAME other', found '", lines[i], "'"));
    }
  }
  return out;
}

at::Tensor guard_input(const InputLayout* layout, size_t index, const at::Tensor& t, std::string& note) {
  note.clear();
  if (layout == nullptr) {
    std::vector<int64_t> order(t.dim());
    std::iota(order.begin(), order.end(), 0);
    return to_layout(t, dense_strides(t.sizes(), order), c10::str("input ", index), note);
  }
  const std::string what = c10::str("input ", index, " (", layout->name, ")");
  const auto refuse = [&](const std::string& why) {
    return std::runtime_error(c10::str(what, ": ", why, "; the package was compiled for ", describe(*layout), ", found ",
                                       dtype_name(t.scalar_type()), " ", t.device().type(), " sizes ", t.sizes(),
                                       " strides ", t.strides()));
  };
  if (!layout->is_tensor) throw std::runtime_error(what + ": the package takes a non-tensor here, found a tensor");
  if (dtype_name(t.scalar_type()) != layout->dtype) throw refuse("dtype " + dtype_name(t.scalar_type()) + " is not " + layout->dtype);
  if (c10::DeviceTypeName(t.device().type(), /*lower_case=*/true) != layout->device)
    throw refuse(c10::str("device ", t.device().type(), " is not ", layout->device));
  if (static_cast<size_t>(t.dim()) != layout->sizes.size())
    throw refuse(c10::str(t.dim(), " dimensions, not ", layout->sizes.size()));
  for (int64_t d = 0; d < t.dim(); ++d) {
    const DimRange r = layout->sizes[d];
    if (r.min != r.max && (t.size(d) < r.min || t.size(d) > r.max))
      throw refuse(c10::str("size ", t.size(d), " of dimension ", d, " is outside the compiled range ", r.min, "..", r.max));
    if (r.min == r.max && t.size(d) != r.min) throw refuse(c10::str("size ", t.size(d), " of dimension ", d, " is not ", r.min));
  }
  return to_layout(t, dense_strides(t.sizes(), layout->order), what, note);
}

}  // namespace backplane::cli
