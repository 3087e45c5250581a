// This instruction set's kernel table (compiled once per CPU_CAPABILITY).
#include "ops.h"

namespace backplane::cpu::CPU_CAPABILITY {

const KernelTable& kernel_table() {
  static const KernelTable table{&identity_conv, &add, &scale_, &sin_out, &crop, &rms_norm};
  return table;
}

}  // namespace backplane::cpu::CPU_CAPABILITY
