// sin_out(x, out=out): out = sin(x); out must already have x's sizes.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

void call(const at::Tensor& x, at::Tensor& out) {
  static auto op = op_handle("sin_out").typed<void(const at::Tensor&, at::Tensor&)>();
  op.call(x, out);
}

Case into_case(std::string name, std::vector<int64_t> x_sizes, Layout x_layout, std::vector<int64_t> out_sizes,
               Layout out_layout) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor x = make(x_sizes, x_layout, dtype, device, 5);
            at::Tensor out = make(out_sizes, out_layout, dtype, device, 6);
            const void* before = out.numel() > 0 ? out.data_ptr() : nullptr;
            call(x, out);
            // out is written where it is, even when strided.
            if (before && out.data_ptr() != before) return std::string("out was reallocated");
            return compare(out, at::sin(x.cpu()), /*exact=*/false);
          }};
}

}  // namespace

OpSuite sin_out_suite() {
  const auto C = Layout::Contiguous;
  return {"sin_out",
          {
              into_case("contiguous", {4, 33}, C, {4, 33}, C),
              into_case("odd_7", {7}, C, {7}, C),
              into_case("odd_769", {769}, C, {769}, C),
              into_case("large", {1 << 16}, C, {1 << 16}, C),
              into_case("zero_dim", {}, C, {}, C),
              into_case("empty", {0, 3}, C, {0, 3}, C),
              into_case("strided_x", {5, 37}, Layout::Strided, {5, 37}, C),
              into_case("transposed_x", {6, 9}, Layout::Transposed, {6, 9}, C),
              into_case("strided_out", {5, 37}, C, {5, 37}, Layout::Strided),
              into_case("offset_both", {3, 11}, Layout::Offset, {3, 11}, Layout::Offset),
              {"out_is_x",
               [](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
                 at::Tensor x = make({4, 9}, Layout::Contiguous, dtype, device, 7);
                 const at::Tensor expected = at::sin(x.cpu());
                 call(x, x);
                 return compare(x, expected, /*exact=*/false);
               }},
              {"partial_overlap_refused",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor base = at::ones({12}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor x = base.slice(0, 0, 10), out = base.slice(0, 1, 11);
                 return expect_error([&] { call(x, out); },
                                     "backplane::sin_out: argument 'out' partially overlaps input 'x'");
               }},
              {"out_of_other_sizes",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor x = at::ones({5, 6}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor out = at::empty({0}, at::TensorOptions().dtype(dtype).device(device));
                 return expect_error([&] { call(x, out); },
                                     "backplane::sin_out: argument 'out' has sizes [0], expected [5, 6] (the sizes of "
                                     "'x'); allocate it with torch.empty_like");
               }},
              {"out_dtype_mismatch",
               [](c10::ScalarType dtype, c10::Device device) {
                 const auto other = dtype == at::kDouble ? at::kFloat : at::kDouble;
                 at::Tensor x = at::ones({3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor out = at::empty({3}, at::TensorOptions().dtype(other).device(device));
                 return expect_error([&] { call(x, out); },
                                     "backplane::sin_out: arguments 'x' and 'out' must share one dtype");
               }},
              {"out_on_cpu",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor x = at::ones({3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor out = at::empty({3}, at::TensorOptions().dtype(dtype));
                 return expect_error([&] { call(x, out); },
                                     "backplane::sin_out: arguments 'x' and 'out' must be on one device");
               },
               /*accelerator_only=*/true},
          }};
}

}  // namespace backplane::conformance
