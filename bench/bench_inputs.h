// An op's arguments for one bench preset, shared by the forward rows (op_workloads.cpp)
// and the forward+backward rows (backward_workloads.cpp), so both time the same inputs.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <vector>

namespace backplane::bench {

// The op's arguments in schema order: random Tensors (never zeros: no kernel is fast by
// accident on special data), other arguments as given or defaulted. A preset with a
// `layout` makes every Tensor argument in that layout (a transposed, strided, offset,
// expanded or permuted view, as the conformance suite makes them).
std::vector<c10::IValue> make_args(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype, c10::Device device);

}  // namespace backplane::bench
