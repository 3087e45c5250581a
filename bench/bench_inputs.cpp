#include "bench_inputs.h"

#include "conformance/inputs.h"

#include <ATen/ATen.h>

namespace backplane::bench {

// Values are drawn on the device: a 64M-element view drawn on the CPU in float64, as the
// conformance suite draws its values, took seconds, each time --interleave rebuilt the row.
std::vector<c10::IValue> make_args(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype, c10::Device device) {
  const auto values = [options = at::TensorOptions().dtype(dtype).device(device)](at::IntArrayRef sizes) {
    return at::randn(sizes, options);
  };
  const auto layout = conformance::layout_named(shape.layout);  // the parser admits only known names
  return conformance::op_arguments(op, shape, [&](at::IntArrayRef sizes) {
    return layout ? conformance::make_in(sizes, *layout, values).view : values(sizes);
  });
}

}  // namespace backplane::bench
