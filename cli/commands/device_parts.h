// The PrivateUse1 device template's file list (backends/npu/new-backend-files.txt) read
// into the device every scaffold gets and its optional parts, and the parts that
// `backplane new-backend --without PART` leaves out. The list is the one place the parts
// are defined: a `[PART]` line starts one, and its files are the lines up to the next.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace backplane::cli {

struct DevicePart {
  std::string name;                // as `--without` takes it: compile, profiler, collectives
  std::vector<std::string> files;  // relative to the template's folder
};

struct DeviceFileList {
  std::vector<std::string> always;  // the lines before the first [PART] header
  std::vector<DevicePart> parts;    // in the list's order
};

// The list's text, '#' comments and blank lines aside.
DeviceFileList parse_device_file_list(const std::string& text);

// The parts that `--without` values name, each value one part or a comma list, checked
// against the list's parts; throws std::invalid_argument naming the part given and the
// parts known.
std::set<std::string> parts_left_out(const DeviceFileList& list, const std::vector<std::string>& without);

// The files a scaffold copies: the device, then each part not left out.
std::vector<std::string> files_to_copy(const DeviceFileList& list, const std::set<std::string>& left_out);

// The names of the parts kept, in the list's order.
std::vector<std::string> parts_kept(const DeviceFileList& list, const std::set<std::string>& left_out);

}  // namespace backplane::cli
