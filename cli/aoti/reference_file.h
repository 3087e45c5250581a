// The reference file `backplane run --input` reads: what models/pipeline.py writes with
// torch.save, {"atol", "rtol", "cases": [{"batch", "inputs": [Tensor], "expected": [Tensor]}]}.
// Read with torch::pickle_load (TorchScript's unpickler): it builds only tensors and plain
// containers and refuses any other class, so a crafted file cannot run code here.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace backplane::cli {

struct ReferenceCase {
  int64_t batch = 0;
  std::vector<at::Tensor> inputs, expected;  // on the CPU, whatever device they were saved from
};

struct Reference {
  double atol = 0, rtol = 0;
  std::vector<ReferenceCase> cases;  // never empty
};

// Throws std::runtime_error naming the file, the key and what was found when the file
// is not such a dict: a missing key, a tolerance that is not a number, no cases.
Reference read_reference(const std::string& path);

}  // namespace backplane::cli
