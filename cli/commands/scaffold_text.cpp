#include "commands/scaffold_text.h"

#include "cli.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

bool lower(char c) { return std::islower(static_cast<unsigned char>(c)) != 0; }
bool upper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }
bool letter(char c) { return lower(c) || upper(c); }

}  // namespace

std::string rename_device(const std::string& text, const std::string& name) {
  std::string capital = name, shout = name;
  capital[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(capital[0])));
  for (char& c : shout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char before = i > 0 ? text[i - 1] : ' ';
    const char after = i + 3 < text.size() ? text[i + 3] : ' ';
    if (text.compare(i, 3, "npu") == 0 && !letter(before) && !lower(after)) {
      out += name;
    } else if (text.compare(i, 3, "Npu") == 0 && !upper(before) && !lower(after)) {
      out += capital;
    } else if (text.compare(i, 3, "NPU") == 0 && !letter(before) && !upper(after)) {
      out += shout;
    } else {
      out += text[i++];
      continue;
    }
    i += 3;
  }
  return out;
}

std::optional<fs::path> find_template(const std::string& name, const char* source, const std::string& marker) {
  std::vector<fs::path> candidates;
  if (const auto dir = command_dir()) candidates.push_back(*dir / ".." / "share" / "backplane" / "templates" / name);
  if (source) candidates.push_back(source);
  for (const auto& dir : candidates)
    if (fs::exists(dir / marker)) return fs::canonical(dir);
  return std::nullopt;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string python_tuple(const std::vector<std::string>& names) {
  std::string items;
  for (const std::string& name : names) items += (items.empty() ? "\"" : ", \"") + name + "\"";
  return "(" + items + (names.size() == 1 ? ",)" : ")");
}

std::string fill(const std::string& text, const Values& values) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t end = text[i] == '@' ? text.find('@', i + 1) : std::string::npos;
    const auto value = end == std::string::npos ? values.end() : values.find(text.substr(i + 1, end - i - 1));
    if (value == values.end()) {
      out += text[i++];
      continue;
    }
    const std::string& v = value->second;
    const bool block = (v.empty() || v.back() == '\n') && (i == 0 || text[i - 1] == '\n') && end + 1 < text.size() &&
                       text[end + 1] == '\n';
    out += v;
    i = end + (block ? 2 : 1);
  }
  return out;
}

std::string from_template(const fs::path& dir, const std::string& rel, const Values& values) {
  if (!fs::is_regular_file(dir / rel))
    throw std::runtime_error("the template " + (dir / rel).string() + " is missing; reinstall Backplane");
  return fill(read_file(dir / rel), values);
}

}  // namespace backplane::cli
