// identity_conv(x): a new tensor, bit for bit equal to x.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

at::Tensor call(const at::Tensor& x) {
  static auto op = op_handle("identity_conv").typed<at::Tensor(const at::Tensor&)>();
  return op.call(x);
}

Case layout_case(std::string name, std::vector<int64_t> sizes, Layout layout) {
  return {std::move(name), [sizes, layout](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor x = make(sizes, layout, dtype, device, 1);
            at::Tensor y = call(x);
            if (y.numel() > 0 && y.data_ptr() == x.data_ptr()) return "output aliases the input";
            if (y.device() != device) return "output on " + y.device().str() + ", expected " + device.str();
            return compare(y, x.cpu(), /*exact=*/true);
          }};
}

}  // namespace

OpSuite identity_conv_suite() {
  return {"identity_conv",
          {
              layout_case("contiguous", {4, 33}, Layout::Contiguous),
              layout_case("odd_7", {7}, Layout::Contiguous),
              layout_case("odd_769", {3, 769}, Layout::Contiguous),
              layout_case("large", {1 << 16}, Layout::Contiguous),
              layout_case("empty", {0, 5}, Layout::Contiguous),
              layout_case("zero_dim", {}, Layout::Contiguous),
              layout_case("strided", {5, 37}, Layout::Strided),
              layout_case("transposed", {6, 9}, Layout::Transposed),
              layout_case("offset", {3, 11}, Layout::Offset),
              layout_case("expanded", {4, 13}, Layout::Expanded),
              {"bad_dtype",
               [](c10::ScalarType, c10::Device device) {
                 at::Tensor x = at::ones({3}, at::TensorOptions().dtype(at::kInt).device(device));
                 return expect_error([&] { call(x); },
                                     "backplane::identity_conv: argument 'x' has dtype int32, expected one of");
               }},
          }};
}

}  // namespace backplane::conformance
