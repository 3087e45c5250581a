// What an AOTInductor package expects of each input, and the check `backplane run` makes
// before every call. A package reads its inputs with the strides it was compiled for and
// computes wrong numbers, without an error, for others (pytorch#141115). The rule is the
// Python loader's (python/backplane/layouts.py, which also defines the record): a wrong
// dtype, device type, rank or size is refused naming both layouts; other strides or a
// data pointer not 16-byte aligned are copied into the compiled layout. A package without
// Backplane's record (`extra/backplane_inputs.txt`) is taken to expect dense contiguous
// inputs (torch.export's usual examples); its sizes, dtype and device are left to torch's
// own check (AOTI_RUNTIME_CHECK_INPUTS=1, torch >= 2.14).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace backplane::cli {

struct DimRange {
  int64_t min = 0, max = 0;  // equal for a static size
};

struct InputLayout {
  std::string name;
  bool is_tensor = false;
  std::string dtype;   // torch's name: float32, bfloat16, ...
  std::string device;  // device type: cpu, cuda
  std::vector<DimRange> sizes;
  std::vector<int64_t> order;  // dimensions, outermost first; strides are dense in this order
};

// The layouts recorded in the package; nullopt when it carries none. Throws
// std::runtime_error naming the line of a malformed record.
std::optional<std::vector<InputLayout>> read_input_layouts(const std::string& package);

// The tensor to pass for input `index`: `t` itself, or a copy in the compiled layout (then
// `note` says what was copied). `layout` null applies the rule for unrecorded packages.
// Throws std::runtime_error for a mismatch that a copy cannot fix.
at::Tensor guard_input(const InputLayout* layout, size_t index, const at::Tensor& t, std::string& note);

}  // namespace backplane::cli
