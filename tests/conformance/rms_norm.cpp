// rms_norm(x, weight, eps) against the composite formula computed in float64.
#include "inputs.h"
#include "op_suites.h"

namespace backplane::conformance {
namespace {

at::Tensor call(const at::Tensor& x, const at::Tensor& w, double eps) {
  static auto op = op_handle("rms_norm").typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op.call(x, w, eps);
}

at::Tensor reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor xd = x.cpu().to(at::kDouble), wd = w.cpu().to(at::kDouble);
  return (xd * at::rsqrt(xd.pow(2).mean(-1, true) + eps) * wd).to(x.scalar_type());
}

// Float32 sums over thousands of elements differ from a float64 reference by more
// than assert_close's default float32 rtol; every other dtype uses the defaults.
std::optional<std::string> compare_norm(const at::Tensor& out, const at::Tensor& expected) {
  if (expected.scalar_type() != at::kFloat) return compare(out, expected, false);
  const at::Tensor a = out.cpu().to(at::kDouble), e = expected.to(at::kDouble);
  if (a.sizes() != e.sizes()) return compare(out, expected, false);
  if (a.numel() == 0 || (a - e).abs().le(1e-5 + 1e-5 * e.abs()).all().item<bool>()) return std::nullopt;
  return "float32 result beyond rtol 1e-5, atol 1e-5; max abs difference " +
         std::to_string((a - e).abs().max().item<double>());
}

Case rows_case(std::string name, std::vector<int64_t> sizes, Layout layout, double eps = 1e-6,
               Layout w_layout = Layout::Contiguous) {
  return {std::move(name), [=](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            at::Tensor x = make(sizes, layout, dtype, device, 9);
            at::Tensor w = make({sizes.back()}, w_layout, dtype, device, 10);
            return compare_norm(call(x, w, eps), reference(x, w, eps));
          }};
}

}  // namespace

OpSuite rms_norm_suite() {
  const auto C = Layout::Contiguous;
  return {"rms_norm",
          {
              rows_case("contiguous", {4, 64}, C),
              rows_case("odd_7", {1, 7}, C),
              rows_case("odd_769", {3, 769}, C),
              rows_case("one_dim", {33}, C),
              rows_case("three_dim", {2, 3, 32}, C),
              rows_case("hidden_4096", {3, 4096}, C),
              rows_case("no_rows", {0, 16}, C),
              rows_case("eps", {5, 40}, C, 1e-2),
              rows_case("strided_x", {4, 67}, Layout::Strided),
              {"padded_rows",
               // Rows with a stride larger than their length: x = base[:, :64].
               [](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
                 at::Tensor x = make({6, 80}, Layout::Contiguous, dtype, device, 11).slice(-1, 0, 64);
                 at::Tensor w = make({64}, Layout::Contiguous, dtype, device, 12);
                 return compare_norm(call(x, w, 1e-6), reference(x, w, 1e-6));
               }},
              rows_case("transposed_x", {6, 9}, Layout::Transposed),
              rows_case("offset_x", {3, 11}, Layout::Offset),
              rows_case("expanded_x", {4, 13}, Layout::Expanded),
              rows_case("strided_weight", {4, 13}, C, 1e-6, Layout::Strided),
              {"weight_mismatch",
               [](c10::ScalarType dtype, c10::Device device) {
                 auto opts = at::TensorOptions().dtype(dtype).device(device);
                 at::Tensor x = at::ones({2, 8}, opts), w = at::ones({7}, opts);
                 return expect_error([&] { call(x, w, 1e-6); },
                                     "backplane::rms_norm: weight must have sizes [8] (x's last dimension), found [7]");
               }},
              {"zero_dim_x",
               [](c10::ScalarType dtype, c10::Device device) {
                 auto opts = at::TensorOptions().dtype(dtype).device(device);
                 at::Tensor x = at::ones({}, opts), w = at::ones({1}, opts);
                 return expect_error([&] { call(x, w, 1e-6); }, "backplane::rms_norm: x must have at least 1 dimension");
               }},
              {"negative_eps",
               [](c10::ScalarType dtype, c10::Device device) {
                 auto opts = at::TensorOptions().dtype(dtype).device(device);
                 at::Tensor x = at::ones({2, 8}, opts), w = at::ones({8}, opts);
                 return expect_error([&] { call(x, w, -1.0); }, "backplane::rms_norm: eps must be finite and >= 0");
               }},
              {"mixed_dtypes",
               [](c10::ScalarType dtype, c10::Device device) {
                 const auto other = dtype == at::kFloat ? at::kBFloat16 : at::kFloat;
                 at::Tensor x = at::ones({2, 8}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor w = at::ones({8}, at::TensorOptions().dtype(other).device(device));
                 return expect_error([&] { call(x, w, 1e-6); },
                                     "backplane::rms_norm: arguments 'x' and 'weight' must share one dtype");
               }},
              {"weight_on_cpu",
               [](c10::ScalarType dtype, c10::Device device) {
                 at::Tensor x = at::ones({2, 8}, at::TensorOptions().dtype(dtype).device(device));
                 at::Tensor w = at::ones({8}, at::TensorOptions().dtype(dtype));
                 return expect_error([&] { call(x, w, 1e-6); },
                                     "backplane::rms_norm: arguments 'x' and 'weight' must be on one device");
               },
               /*accelerator_only=*/true},
          }};
}

}  // namespace backplane::conformance
