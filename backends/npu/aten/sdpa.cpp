// Scaled dot product attention's fused path on the device. torch's
// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub which kernel to
// run; "overrideable" means _scaled_dot_product_fused_attention_overrideable, whose
// backward (under autograd) is _scaled_dot_product_fused_attention_overrideable_backward.
// A device with a fused attention kernel plugs it in here; the emulated device computes
// the math formulas over npu ops (products on the device, softmax through the CPU
// fallback), in float32 for half types, and casts at the end.
//
// Dropout draws its keep mask on the device, with an npu generator seeded by a number
// drawn from the device's default generator (so torch.manual_seed makes it repeat). That
// seed is the forward's philox_seed (philox_offset is 0): the backward seeds a generator
// with it and draws the same mask, as CUDA's kernels do with their Philox seed and offset.
// Limits: 4-D inputs (batch, heads, length, dim) with the same number of heads in q, k
// and v; anything else (GQA, 3-D, nested) the choice sends to torch's math path. A fully
// masked row gives zeros, as torch's math path does (_safe_softmax).
#include "device/generator.h"
#include "device/npu_stream.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_safe_softmax.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>

namespace backplane::npu {
namespace {

// sym_size, not size: torch.export asks with fake tensors of symbolic sizes, and size()
// there specializes every dimension (a dynamic batch became the constant 3).
bool fits_the_device(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && !q.is_nested() && q.sym_size(1) == k.sym_size(1) &&
         k.sym_size(1) == v.sym_size(1);
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& /*attn_mask*/, double /*dropout_p*/, bool /*is_causal*/,
                         std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const auto backend = fits_the_device(q, k, v) ? sdp::SDPBackend::overrideable : sdp::SDPBackend::math;
  return static_cast<int64_t>(backend);
}

void check_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(fits_the_device(q, k, v), "backplane npu: ", op,
              " expects 4-D query, key and value (batch, heads, length, dim) with the same number of heads; got "
              "sizes ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.device() == k.device() && k.device() == v.device(), "backplane npu: ", op,
              " expects query, key and value on one device; got ", q.device(), ", ", k.device(), " and ",
              v.device());
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(3) == q.size(3) && v.size(2) == k.size(2),
              "backplane npu: ", op, " expects key (", q.size(0), ", H, S, ", q.size(3), ") and value (", q.size(0),
              ", H, S, Ev) for query ", q.sizes(), "; got key ", k.sizes(), " and value ", v.sizes());
}

double scale_of(const at::Tensor& q, std::optional<double> scale) {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

// softmax(q k^T * scale + bias), causal from the top left, in float32.
at::Tensor attention_weights(const at::Tensor& q, const at::Tensor& k, const at::Tensor& bias, bool is_causal,
                             double scale) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (bias.defined()) scores = scores.add(bias.to(at::kFloat));
  if (is_causal) {
    const at::Tensor keep = at::ones({q.size(2), k.size(2)}, scores.options().dtype(at::kBool)).tril();
    scores.masked_fill_(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  return scores;
}

// A seed drawn from the default generator of `device`, for the dropout mask of one call.
int64_t draw_dropout_seed(c10::DeviceIndex device) {
  at::Generator host = default_generator(device).get<NpuGeneratorImpl>()->host();
  std::lock_guard<std::mutex> lock(host.mutex());
  return static_cast<int64_t>(host.get<at::CPUGeneratorImpl>()->random64() >> 1);  // non-negative
}

// `value` in a tensor laid out as torch.empty_like(like) (memory_format=preserve_format).
at::Tensor in_layout_of(const at::Tensor& value, const at::Tensor& like) {
  at::Tensor result = at::empty_like(like);  // like's dtype: copy_ casts the float32 value
  result.copy_(value);
  return result;
}

// The mask of kept elements, scaled by 1 / (1 - p): the same for the same seed.
at::Tensor dropout_scale(const at::Tensor& like, double p, int64_t seed) {
  at::Generator generator = new_generator(like.device().index());
  generator.set_current_seed(static_cast<uint64_t>(seed));
  at::Tensor keep = at::empty_like(like, like.options().dtype(at::kBool));
  keep.bernoulli_(1.0 - p, generator);
  return keep.to(at::kFloat).mul_(p == 1.0 ? 0.0 : 1.0 / (1.0 - p));  // p == 1: zeros, not NaN
}

// The outputs take the layouts torch's meta functions (torch/_meta_registrations.py) give
// these ops, so a compiled graph's fake tensors have the strides the kernel returns.
// The forward's output (batch, heads, length, Ev) keeps the order of query's strides, as
// alloc_with_matching_layout does (a stable sort, largest stride first).
at::Tensor in_query_layout(const at::Tensor& output, const at::Tensor& query) {
  if (output.sizes() == query.sizes()) return in_layout_of(output, query);
  std::array<int64_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::array<int64_t, 4> strides{};
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= output.size(*it);
  }
  at::Tensor result = at::empty_strided(output.sizes(), strides, output.options());
  result.copy_(output);
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool return_debug_mask,
                std::optional<double> scale) {
  constexpr const char* op = "_scaled_dot_product_fused_attention_overrideable";
  check_inputs(op, query, key, value);
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "backplane npu: ", op, " expects 0 <= dropout_p <= 1; got ",
              dropout_p);
  const at::Tensor bias = attn_bias.value_or(at::Tensor());
  TORCH_CHECK(!bias.defined() || at::isFloatingType(bias.scalar_type()), "backplane npu: ", op,
              " expects a floating-point attn_bias (scaled_dot_product_attention turns a boolean mask into one); "
              "got ", bias.scalar_type());
  const at::Tensor q = query.to(at::kFloat), k = key.to(at::kFloat), v = value.to(at::kFloat);
  const at::Tensor scores = attention_weights(q, k, bias, is_causal, scale_of(query, scale));
  const at::Tensor logsumexp = at::logsumexp(scores, -1);
  at::Tensor weights = at::_safe_softmax(scores, -1);
  const int64_t seed = dropout_p > 0.0 ? draw_dropout_seed(query.device().index()) : 0;
  if (dropout_p > 0.0) weights = weights.mul(dropout_scale(weights, dropout_p, seed));
  const at::Tensor output = in_query_layout(at::matmul(weights, v).to(query.scalar_type()), query);
  const auto cpu_long = at::TensorOptions().dtype(at::kLong);
  return {output,
          logsumexp,
          at::Tensor(),
          at::Tensor(),
          c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)),
          at::scalar_tensor(seed, cpu_long),
          at::scalar_tensor(0, cpu_long),
          return_debug_mask ? weights : at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& /*out*/,
    const at::Tensor& /*logsumexp*/, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  constexpr const char* op = "_scaled_dot_product_fused_attention_overrideable_backward";
  check_inputs(op, query, key, value);
  TORCH_CHECK(dropout_p == 0.0 || (philox_seed.defined() && philox_seed.numel() == 1), "backplane npu: ", op,
              " with dropout expects philox_seed, the forward's one-element seed; got ",
              philox_seed.defined() ? philox_seed.sizes() : at::IntArrayRef{0});
  const double s = scale_of(query, scale);
  const at::Tensor q = query.to(at::kFloat), k = key.to(at::kFloat), v = value.to(at::kFloat);
  const at::Tensor dout = grad_out.to(at::kFloat);
  const at::Tensor weights = at::_safe_softmax(attention_weights(q, k, attn_bias, is_causal, s), -1);
  at::Tensor dropped = weights, grad_dropped = at::matmul(dout, v.transpose(-2, -1));
  if (dropout_p > 0.0) {
    const at::Tensor mask = dropout_scale(weights, dropout_p, philox_seed.item<int64_t>());
    dropped = weights.mul(mask);
    grad_dropped = grad_dropped.mul(mask);
  }
  // d softmax: dS = P * (dP - rowsum(dP * P)).
  const at::Tensor grad_scores = weights.mul(grad_dropped.sub(grad_dropped.mul(weights).sum(-1, /*keepdim=*/true)));
  at::Tensor grad_q, grad_k, grad_v, grad_bias;
  // Each gradient is laid out as torch.empty_like(its input), as the meta function says.
  if (grad_input_mask[0]) grad_q = in_layout_of(at::matmul(grad_scores, k).mul_(s), query);
  if (grad_input_mask[1]) grad_k = in_layout_of(at::matmul(grad_scores.transpose(-2, -1), q).mul_(s), key);
  if (grad_input_mask[2]) grad_v = in_layout_of(at::matmul(dropped.transpose(-2, -1), dout), value);
  if (grad_input_mask[3] && attn_bias.defined())
    grad_bias = in_layout_of(grad_scores.sum_to_size(attn_bias.sizes()), attn_bias);
  return {grad_q, grad_k, grad_v, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", &fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", &fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &fused_attention_backward);
}

}  // namespace backplane::npu

namespace at::native {
// What torch's scaled_dot_product_attention asks (torch._fused_sdp_choice is the op above).
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &backplane::npu::fused_sdp_choice);
}  // namespace at::native
