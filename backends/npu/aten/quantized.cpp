// Quantized tensors on the device (dispatch key QuantizedPrivateUse1): made by
// empty_quantized, _empty_affine_quantized and quantize_per_tensor, moved by copies
// (.to("npu"), .cpu()), read by int_repr, dequantize, q_scale, q_zero_point and qscheme.
// A quantized tensor's memory holds its integers (int8, uint8 or int32), so copies and
// int_repr work on a plain integer tensor over the same memory (raw_integers); quantizing
// and dequantizing run ATen's CPU kernels over host views, so the numbers are the CPU's.
// Limits: quantize_per_tensor and dequantize per-tensor affine only, and copies between
// tensors of one qscheme and dtype (as PyTorch's own copy); the sub-byte types
// (quint4x2, quint2x4) are refused; every other op on a quantized npu tensor is
// PyTorch's "Could not run ... 'Quantized<device>' backend" error (the CPU fallback serves
// plain tensors only).
#include "device/launch.h"

#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/dequantize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <c10/core/QScheme.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>

namespace backplane::npu {
namespace {

c10::ScalarType integer_type(const at::Tensor& q) {
  switch (q.scalar_type()) {
    case at::kQInt8: return at::kChar;
    case at::kQUInt8: return at::kByte;
    case at::kQInt32: return at::kInt;
    default:
      TORCH_CHECK(false, "backplane npu: quantized npu tensors hold qint8, quint8 or qint32; got ", q.scalar_type());
  }
}

// A plain tensor of q's integers: the same memory, sizes and strides (CPU or npu).
at::Tensor raw_integers(const at::Tensor& q) {
  at::Tensor raw = at::empty({0}, q.options().dtype(integer_type(q)));
  return raw.set_(q.storage(), q.storage_offset(), q.sizes(), q.strides());
}

void check_per_tensor_affine(const char* op, const at::Tensor& q) {
  TORCH_CHECK(q.qscheme() == at::kPerTensorAffine, "backplane npu: ", op,
              " on npu supports per-tensor affine quantization; got ", c10::toString(q.qscheme()));
}

// _copy_from(src, dst): what copy_ calls for any copy with a quantized npu tensor on
// either side (PyTorch hands a copy that involves the device here before its own checks).
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(src.is_quantized() && dst.is_quantized(), "backplane npu: copying a quantized npu tensor needs "
              "quantized tensors on both sides (dequantize() gives a float tensor, quantize_per_tensor a quantized "
              "one); got ", src.scalar_type(), " to ", dst.scalar_type());
  TORCH_CHECK(src.qscheme() == dst.qscheme(), "backplane npu: copying a quantized tensor of qscheme ",
              c10::toString(src.qscheme()), " into one of qscheme ", c10::toString(dst.qscheme()),
              "; expected the same qscheme");
  TORCH_CHECK(src.scalar_type() == dst.scalar_type(), "backplane npu: copying a quantized tensor of dtype ",
              src.scalar_type(), " into one of dtype ", dst.scalar_type(), "; expected the same dtype");
  raw_integers(dst).copy_(raw_integers(src), non_blocking);
  return dst;
}

at::Tensor quantize_per_tensor(const at::Tensor& self, double scale, int64_t zero_point, at::ScalarType dtype) {
  at::Tensor q = at::_empty_affine_quantized(self.sizes(), self.options().dtype(dtype), scale, zero_point);
  const at::Tensor raw = raw_integers(q);  // checks dtype
  if (q.numel() > 0)
    launch(self.device().index(), "quantize_per_tensor", [self, raw, scale, zero_point, dtype] {
      const at::Tensor cpu = at::quantize_per_tensor(host_view(self), scale, zero_point, dtype);
      std::memcpy(host_view(raw).data_ptr(), cpu.data_ptr(), cpu.nbytes());  // both contiguous
    });
  return q;
}

at::Tensor dequantize(const at::Tensor& self) {
  check_per_tensor_affine("dequantize", self);
  const at::Tensor raw = raw_integers(self).contiguous();
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  const double scale = self.q_scale();
  const int64_t zero_point = self.q_zero_point();
  const at::ScalarType dtype = self.scalar_type();
  if (out.numel() > 0)
    launch(self.device().index(), "dequantize", [raw, out, scale, zero_point, dtype] {
      at::Tensor cpu = at::_empty_affine_quantized(raw.sizes(), at::TensorOptions().dtype(dtype), scale, zero_point);
      std::memcpy(cpu.data_ptr(), host_view(raw).data_ptr(), cpu.nbytes());
      host_view(out).copy_(at::dequantize(cpu));
    });
  return out;
}

at::Tensor int_repr(const at::Tensor& self) { return raw_integers(self).clone(); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty_quantized", &at::native::empty_quantized);
  m.impl("_empty_affine_quantized", &at::native::empty_affine_quantized);
  m.impl("_empty_per_channel_affine_quantized", &at::native::empty_per_channel_affine_quantized);
  m.impl("_copy_from", &copy_from);
  m.impl("dequantize.self", &dequantize);
  m.impl("int_repr", &int_repr);
  m.impl("q_scale", &at::native::q_scale_quant);
  m.impl("q_zero_point", &at::native::q_zero_point_quant);
  m.impl("qscheme", &at::native::qscheme_quant);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("quantize_per_tensor", &quantize_per_tensor); }

}  // namespace backplane::npu
