// The kernel stubs `backplane new-backend` writes, one kernels/OP.cpp per registry op: the
// op's C++ signature from its schema (on torch's C++ API, or on its stable ABI).
#pragma once

#include "commands/scaffold_text.h"

#include <backplane/registry.h>

#include <filesystem>
#include <string>

namespace backplane::cli {

struct KernelFile {
  std::string rel;  // kernels/OP.cpp
  std::string text;
};

// kernels/OP.cpp: the op's C++ signature, unregistered. On the stable ABI: the same over
// stable types; mul is the worked example (kernels/mul.cu on CUDA), and an op whose
// arguments the stable path cannot carry gets a note instead. `values` holds NAME and KEY.
KernelFile kernel_file(const std::filesystem::path& templates, const OpDef& op, Values values, bool stable);

}  // namespace backplane::cli
