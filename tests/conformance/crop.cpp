// crop(img, box=[top, left, height, width]): a copy of a window of the last two dimensions.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

at::Tensor call(const at::Tensor& img, std::vector<int64_t> box) {
  static auto op = op_handle("crop").typed<at::Tensor(const at::Tensor&, at::IntArrayRef)>();
  return op.call(img, box);
}

Case window_case(std::string name, std::vector<int64_t> sizes, Layout layout, std::vector<int64_t> box) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor img = make(sizes, layout, dtype, device, 8);
            at::Tensor out = call(img, box);
            if (!out.is_contiguous()) return std::string("output is not contiguous");
            const at::Tensor expected =
                img.cpu().slice(-2, box[0], box[0] + box[2]).slice(-1, box[1], box[1] + box[3]).contiguous();
            return compare(out, expected, /*exact=*/true);
          }};
}

Case error_case(std::string name, std::vector<int64_t> sizes, std::vector<int64_t> box, std::string expected) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) {
            at::Tensor img = at::zeros(sizes, at::TensorOptions().dtype(dtype).device(device));
            return expect_error([&] { call(img, box); }, expected);
          }};
}

}  // namespace

OpSuite crop_suite() {
  const auto C = Layout::Contiguous;
  return {"crop",
          {
              window_case("image", {3, 8, 8}, C, {1, 2, 4, 5}),
              window_case("two_dim", {7, 9}, C, {0, 0, 7, 9}),
              window_case("batch", {2, 3, 16, 20}, C, {3, 4, 9, 11}),
              window_case("odd_769", {2, 769}, C, {1, 5, 1, 700}),
              window_case("empty_window", {3, 8, 8}, C, {2, 2, 0, 3}),
              window_case("empty_batch", {0, 8, 8}, C, {2, 2, 3, 3}),
              window_case("strided", {3, 8, 10}, Layout::Strided, {1, 1, 5, 6}),
              window_case("transposed", {3, 9, 8}, Layout::Transposed, {0, 1, 6, 4}),
              window_case("offset", {2, 6, 6}, Layout::Offset, {1, 1, 4, 4}),
              window_case("expanded", {4, 6, 6}, Layout::Expanded, {0, 2, 6, 3}),
              error_case("box_too_large", {3, 8, 8}, {4, 0, 5, 8},
                         "backplane::crop: box [4, 0, 5, 8] does not fit img of sizes [3, 8, 8] (expected top + height <= 8"),
              error_case("negative_box", {3, 8, 8}, {0, -1, 2, 2}, "backplane::crop: box values must be >= 0"),
              error_case("one_dim_img", {8}, {0, 0, 1, 1}, "backplane::crop: img must have at least 2 dimensions"),
              error_case("box_of_three", {3, 8, 8}, {0, 0, 1}, "backplane::crop: box must have 4 values"),
          }};
}

}  // namespace backplane::conformance
