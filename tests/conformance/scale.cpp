// scale_(x, s): x *= s in place, against at::mul.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

void call(at::Tensor& x, double s) {
  static auto op = op_handle("scale_").typed<void(at::Tensor&, double)>();
  op.call(x, s);
}

Case layout_case(std::string name, std::vector<int64_t> sizes, Layout layout, double s = 1.75) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor x = make(sizes, layout, dtype, device, 3);
            const at::Tensor expected = at::mul(x.cpu(), s);
            const void* before = x.numel() > 0 ? x.data_ptr() : nullptr;
            call(x, s);
            if (before && x.data_ptr() != before) return std::string("x was reallocated, not written in place");
            return compare(x, expected, /*exact=*/false);
          }};
}

}  // namespace

OpSuite scale_suite() {
  return {"scale_",
          {
              layout_case("contiguous", {4, 33}, Layout::Contiguous),
              layout_case("negative", {4, 33}, Layout::Contiguous, -0.5),
              layout_case("odd_7", {7}, Layout::Contiguous),
              layout_case("odd_769", {769}, Layout::Contiguous),
              layout_case("large", {1 << 16}, Layout::Contiguous, 3.0),
              layout_case("empty", {0, 5}, Layout::Contiguous),
              layout_case("zero_dim", {}, Layout::Contiguous),
              layout_case("transposed", {6, 9}, Layout::Transposed),
              layout_case("offset", {3, 11}, Layout::Offset),
              {"strided_leaves_gaps",
               // Writing through a strided view must leave the elements between its
               // elements untouched.
               [](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
                 at::Tensor base = make({5, 74}, Layout::Contiguous, dtype, device, 4);
                 at::Tensor expected = base.cpu().clone();
                 expected.slice(-1, 0, c10::nullopt, 2).mul_(2.0);
                 at::Tensor view = base.slice(-1, 0, c10::nullopt, 2);
                 call(view, 2.0);
                 return compare(base, expected, /*exact=*/false);
               }},
              {"expanded_refused",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor x = at::ones({1, 4}, at::TensorOptions().dtype(dtype).device(device)).expand({3, 4});
                 return expect_error([&] { call(x, 2.0); },
                                     "backplane::scale_: argument 'x' is written in place but has overlapping memory");
               }},
              {"bad_dtype",
               [](c10::ScalarType, c10::Device device) {
                 at::Tensor x = at::ones({3}, at::TensorOptions().dtype(at::kInt).device(device));
                 return expect_error([&] { call(x, 2.0); }, "backplane::scale_: argument 'x' has dtype int32");
               }},
          }};
}

}  // namespace backplane::conformance
