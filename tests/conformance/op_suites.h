// One function per registry op, each in the file named after the op.
#pragma once

#include "conformance.h"

namespace backplane::conformance {
OpSuite identity_conv_suite();
OpSuite add_suite();
OpSuite scale_suite();
OpSuite sin_out_suite();
OpSuite crop_suite();
OpSuite rms_norm_suite();
}  // namespace backplane::conformance
