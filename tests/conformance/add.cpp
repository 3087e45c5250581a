// add(a, b, alpha): a + alpha * b with broadcasting, against at::add.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

at::Tensor call(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  static auto op = op_handle("add").typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>();
  return op.call(a, b, alpha);
}

Case shapes_case(std::string name, std::vector<int64_t> a_sizes, Layout a_layout, std::vector<int64_t> b_sizes,
                 Layout b_layout, double alpha = 1.0) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor a = make(a_sizes, a_layout, dtype, device, 1);
            at::Tensor b = make(b_sizes, b_layout, dtype, device, 2);
            at::Tensor out = call(a, b, alpha);
            if (!out.is_contiguous()) return std::string("output is not contiguous");
            return compare(out, at::add(a.cpu(), b.cpu(), alpha), /*exact=*/false);
          }};
}

}  // namespace

OpSuite add_suite() {
  const auto C = Layout::Contiguous;
  return {"add",
          {
              shapes_case("contiguous", {4, 33}, C, {4, 33}, C),
              shapes_case("alpha", {4, 33}, C, {4, 33}, C, 2.5),
              shapes_case("negative_alpha", {17}, C, {17}, C, -1.0),
              shapes_case("odd_7", {7}, C, {7}, C),
              shapes_case("odd_769", {769}, C, {769}, C),
              shapes_case("large", {1 << 16}, C, {1 << 16}, C, 0.5),
              shapes_case("broadcast", {4, 1, 5}, C, {3, 5}, C),
              shapes_case("broadcast_row", {6, 769}, C, {769}, C),
              shapes_case("zero_dim_and_tensor", {}, C, {3, 4}, C),
              shapes_case("zero_dim", {}, C, {}, C),
              shapes_case("empty", {0, 5}, C, {0, 5}, C),
              shapes_case("empty_broadcast", {0, 5}, C, {5}, C),
              shapes_case("strided", {5, 37}, Layout::Strided, {5, 37}, C),
              shapes_case("transposed", {6, 9}, C, {6, 9}, Layout::Transposed),
              shapes_case("offset", {3, 11}, Layout::Offset, {3, 11}, Layout::Offset),
              shapes_case("expanded", {4, 13}, Layout::Expanded, {4, 13}, Layout::Strided),
              {"bad_dtype",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor a = at::ones({3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor b = at::ones({3}, at::TensorOptions().dtype(at::kLong).device(device));
                 return expect_error([&] { call(a, b, 1); },
                                     "backplane::add: argument 'b' has dtype int64, expected one of: float32, float64, "
                                     "float16, bfloat16");
               }},
              {"mixed_dtypes",
               [](c10::ScalarType dtype, c10::Device device) {
                 const auto other = dtype == at::kDouble ? at::kFloat : at::kDouble;
                 at::Tensor a = at::ones({3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor b = at::ones({3}, at::TensorOptions().dtype(other).device(device));
                 return expect_error([&] { call(a, b, 1); }, "backplane::add: arguments 'a' and 'b' must share one dtype");
               }},
              {"not_broadcastable",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor a = at::ones({2, 3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor b = at::ones({4}, at::TensorOptions().dtype(dtype).device(device));
                 return expect_error([&] { call(a, b, 1); },
                                     "backplane::add: sizes of 'a' [2, 3] and 'b' [4] do not broadcast (dimension -1: 3 vs 4)");
               }},
              {"mixed_devices",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor a = at::ones({3}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor b = at::ones({3}, at::TensorOptions().dtype(dtype));
                 return expect_error([&] { call(a, b, 1); }, "backplane::add: arguments 'a' and 'b' must be on one device");
               },
               /*accelerator_only=*/true},
          }};
}

}  // namespace backplane::conformance
