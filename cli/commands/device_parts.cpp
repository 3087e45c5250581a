#include "commands/device_parts.h"

#include "util/strings.h"

#include <sstream>
#include <stdexcept>

namespace backplane::cli {

DeviceFileList parse_device_file_list(const std::string& text) {
  DeviceFileList list;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.size() > 2 && line.front() == '[' && line.back() == ']')
      list.parts.push_back(DevicePart{line.substr(1, line.size() - 2), {}});
    else
      (list.parts.empty() ? list.always : list.parts.back().files).push_back(line);
  }
  return list;
}

std::set<std::string> parts_left_out(const DeviceFileList& list, const std::vector<std::string>& without) {
  std::set<std::string> known, out;
  for (const DevicePart& part : list.parts) known.insert(part.name);
  for (const std::string& value : without)
    for (const std::string& name : detail::split(value, ',')) {
      if (!known.count(name)) {
        std::vector<std::string> names;
        for (const DevicePart& part : list.parts) names.push_back(part.name);
        throw std::invalid_argument("--without '" + name + "': expected a part of the PrivateUse1 device (" +
                                    detail::join(names) + ")");
      }
      out.insert(name);
    }
  return out;
}

std::vector<std::string> files_to_copy(const DeviceFileList& list, const std::set<std::string>& left_out) {
  std::vector<std::string> files = list.always;
  for (const DevicePart& part : list.parts)
    if (!left_out.count(part.name)) files.insert(files.end(), part.files.begin(), part.files.end());
  return files;
}

std::vector<std::string> parts_kept(const DeviceFileList& list, const std::set<std::string>& left_out) {
  std::vector<std::string> kept;
  for (const DevicePart& part : list.parts)
    if (!left_out.count(part.name)) kept.push_back(part.name);
  return kept;
}

}  // namespace backplane::cli
