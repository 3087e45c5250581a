"""`decoder_block`: a small pre-norm language-model block with random weights:
rms_norm -> causal self-attention (PyTorch's SDPA) -> residual add -> rms_norm -> SwiGLU
MLP -> residual add, with the norms and residuals on backplane ops. Checked against the
same block in plain PyTorch.
"""
import torch
import torch.nn.functional as F

import backplane  # noqa: F401

from .spec import ModelSpec

DIM, HEADS, HIDDEN, SEQ = 64, 4, 128, 16
EPS = 1e-6


class DecoderBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)

        def weight(*shape):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) / shape[-1] ** 0.5, requires_grad=False)

        self.attn_norm = torch.nn.Parameter(1 + 0.1 * torch.randn(DIM, generator=g), requires_grad=False)
        self.mlp_norm = torch.nn.Parameter(1 + 0.1 * torch.randn(DIM, generator=g), requires_grad=False)
        self.qkv = weight(3 * DIM, DIM)
        self.out = weight(DIM, DIM)
        self.gate = weight(HIDDEN, DIM)
        self.up = weight(HIDDEN, DIM)
        self.down = weight(DIM, HIDDEN)

    def attention(self, h):
        batch, seq, _ = h.shape
        q, k, v = F.linear(h, self.qkv).split(DIM, dim=-1)
        q, k, v = (t.reshape(batch, seq, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.linear(a.transpose(1, 2).reshape(batch, seq, DIM), self.out)

    def mlp(self, h):
        return F.linear(F.silu(F.linear(h, self.gate)) * F.linear(h, self.up), self.down)

    def forward(self, x):
        b = torch.ops.backplane
        x = b.add(x, self.attention(b.rms_norm(x, self.attn_norm, EPS)))
        return b.add(x, self.mlp(b.rms_norm(x, self.mlp_norm, EPS)))


def plain_rms_norm(x, weight):
    # Accumulate in float32, as the backplane kernels do, then round once.
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def reference(model: DecoderBlock, x):
    x = x + model.attention(plain_rms_norm(x, model.attn_norm))
    return x + model.mlp(plain_rms_norm(x, model.mlp_norm))


def build(device, dtype):
    return DecoderBlock().to(device=device, dtype=dtype).eval()


def inputs(batch, device, dtype):
    g = torch.Generator().manual_seed(100 + batch)
    return (torch.randn(batch, SEQ, DIM, generator=g).to(device=device, dtype=dtype),)


SPEC = ModelSpec(
    name="decoder_block",
    doc="rms_norm, SDPA attention, SwiGLU MLP, residuals through backplane::add",
    build=build,
    inputs=inputs,
    reference=reference,
    tolerances={torch.float32: (1e-4, 1e-4), torch.bfloat16: (3e-2, 3e-2)},
    dtypes=(torch.float32, torch.bfloat16),
)
