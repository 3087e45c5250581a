// The text of the files `backplane new-backend` writes (commands/new_backend.cpp): its
// templates found and filled in, and the npu device's files renamed for the new device.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace backplane::cli {

// A template's placeholders (@KEY@) and their values.
using Values = std::map<std::string, std::string>;

// npu -> name, Npu -> Name, NPU -> NAME wherever the template's device name stands as a
// word or a part of an identifier (npuMalloc, kNpu, BACKPLANE_NPU_X, backplane_npu),
// never inside another word (input, INPUT).
std::string rename_device(const std::string& text, const std::string& name);

// A template folder: installed beside the command (share/backplane/templates/NAME), or
// `source` in the source tree for a command run from a build directory. It must hold
// `marker`.
std::optional<std::filesystem::path> find_template(const std::string& name, const char* source,
                                                   const std::string& marker);

// The file's bytes.
std::string read_file(const std::filesystem::path& path);

// python/backplane_NAME/_parts.py's tuple: ("compile", "profiler"), ("compile",) or ().
std::string python_tuple(const std::vector<std::string>& names);

// `text` with each @KEY@ of `values` replaced, in one pass: a value is never read for
// placeholders. A placeholder alone on its line whose value is empty or ends in a newline
// (a block) takes the whole line.
std::string fill(const std::string& text, const Values& values);

// Template `rel` of folder `dir`, filled in; throws std::runtime_error naming a missing one.
std::string from_template(const std::filesystem::path& dir, const std::string& rel, const Values& values);

}  // namespace backplane::cli
