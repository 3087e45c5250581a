"""Trains a small decoder language model whose norms, residual adds, rotary position
embedding (on q and k) and SwiGLU gate (silu_mul) run on Backplane ops, beside a pure-PyTorch twin with the same weights, on a task it makes
up: reversing a sequence of tokens.

    python -m models.train --backend cpu|cuda|npu --steps 200 [--compile]

On npu the matrix products run on the device's own kernels (mm, bmm, addmm); the aten ops
it has no kernel for (AdamW's foreach updates, the loss) take its CPU fallback, which
warns once per op.

At every step the two models see the same batch; every parameter's gradient of the
Backplane model is compared with the twin's (float32 tolerance), then both take an
AdamW step. The loss should fall from about log(vocab). The gradients of the Backplane
ops come from their registry `backward:` entries (the core's autograd kernel): rms_norm's
and silu_mul's are the fused backward ops rms_norm_backward and silu_mul_backward.
"""
from __future__ import annotations

import argparse
import math
import sys

import torch
import torch.nn.functional as F

import backplane

VOCAB, DIM, HEADS, HIDDEN, LAYERS, HALF = 12, 64, 4, 128, 2, 6
EPS = 1e-6


class Ops:
    """The operations the two twins differ in."""

    def __init__(self, use_backplane: bool):
        self.use_backplane = use_backplane

    def rms_norm(self, x, w):
        if self.use_backplane:
            return torch.ops.backplane.rms_norm(x, w, EPS)
        return F.rms_norm(x, (x.shape[-1],), w, EPS)

    def add(self, a, b):
        return torch.ops.backplane.add(a, b) if self.use_backplane else a + b

    def silu_mul(self, gate, up):
        return torch.ops.backplane.silu_mul(gate, up) if self.use_backplane else F.silu(gate) * up

    def rotary(self, x, cos, sin):
        if self.use_backplane:
            return torch.ops.backplane.rotary(x, cos, sin)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rotary_cache(positions: int, head_dim: int, base: float = 10000.0):
    """(cos, sin), each [positions, head_dim / 2]: Llama's angles pos * base^(-2i / head_dim)."""
    inv_freq = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(positions, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


class Block(torch.nn.Module):
    def __init__(self, ops: Ops, g: torch.Generator):
        super().__init__()
        self.ops = ops

        def weight(*shape):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) / shape[-1] ** 0.5)

        self.attn_norm = torch.nn.Parameter(torch.ones(DIM))
        self.mlp_norm = torch.nn.Parameter(torch.ones(DIM))
        self.qkv, self.out = weight(3 * DIM, DIM), weight(DIM, DIM)
        self.gate_up, self.down = weight(2 * HIDDEN, DIM), weight(DIM, HIDDEN)

    def forward(self, x, cos, sin):
        batch, seq, _ = x.shape
        h = self.ops.rms_norm(x, self.attn_norm)
        q, k, v = F.linear(h, self.qkv).split(DIM, dim=-1)
        q, k, v = (t.reshape(batch, seq, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        # q and k reach rotary as strided views of the fused qkv projection ([batch, heads, seq, head_dim]).
        q, k = self.ops.rotary(q, cos, sin), self.ops.rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, seq, DIM)
        x = self.ops.add(x, F.linear(a, self.out))
        h = self.ops.rms_norm(x, self.mlp_norm)
        # SwiGLU: one projection to [..., 2 * HIDDEN]; its halves reach silu_mul as strided views.
        gate, up = F.linear(h, self.gate_up).split(HIDDEN, dim=-1)
        return self.ops.add(x, F.linear(self.ops.silu_mul(gate, up), self.down))


class DecoderLM(torch.nn.Module):
    def __init__(self, use_backplane: bool, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.ops = Ops(use_backplane)
        self.embed = torch.nn.Parameter(torch.randn(VOCAB, DIM, generator=g) * 0.1)
        self.pos = torch.nn.Parameter(torch.randn(2 * HALF + 1, DIM, generator=g) * 0.1)
        self.blocks = torch.nn.ModuleList(Block(self.ops, g) for _ in range(LAYERS))
        self.final_norm = torch.nn.Parameter(torch.ones(DIM))
        cos, sin = rotary_cache(2 * HALF + 1, DIM // HEADS)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        seq = tokens.shape[1]
        x = self.embed[tokens] + self.pos[:seq]
        cos, sin = self.cos[:seq], self.sin[:seq]
        for block in self.blocks:
            x = block(x, cos, sin)
        return F.linear(self.ops.rms_norm(x, self.final_norm), self.embed)  # tied output embedding


def batch(size: int, g: torch.Generator, device):
    """[x1..xn, SEP, xn..x1]: the model reads the first half and must write it reversed."""
    first = torch.randint(1, VOCAB, (size, HALF), generator=g)
    seq = torch.cat([first, torch.zeros(size, 1, dtype=torch.long), first.flip(1)], dim=1)
    return seq[:, :-1].to(device), seq[:, 1:].to(device)


def loss_of(model, tokens, targets):
    logits = model(tokens)[:, HALF:]  # predictions from SEP on: the reversed half
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets[:, HALF:].reshape(-1))


def check_gradients(model, reference, step) -> float:
    """The largest difference between the two models' gradients, parameter by parameter;
    raises where `model` has none or one differs beyond float32 tolerance."""
    worst = 0.0
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if p.grad is None:
            raise RuntimeError(f"step {step}: parameter {name} got no gradient through the Backplane model")
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"step {step}, {name}: {m}")
        worst = max(worst, (p.grad - q.grad).abs().max().item())
    return worst


def train(backend="cpu", steps=100, batch_size=32, compile=False, lr=3e-3, log=print, compile_backend="inductor"):
    """Returns (losses, largest gradient difference against the twin over all steps).
    Raises where a parameter gets no gradient or one differs from the twin's."""
    device = {"cpu": "cpu", "cuda": "cuda", "npu": "npu"}[backend]
    backplane.load(backend)
    ours = DecoderLM(use_backplane=True).to(device)
    twin = DecoderLM(use_backplane=False).to(device)
    twin.load_state_dict(ours.state_dict())
    run_ours, run_twin = ((torch.compile(ours, backend=compile_backend), torch.compile(twin, backend=compile_backend))
                          if compile else (ours, twin))
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=lr)
    opt_twin = torch.optim.AdamW(twin.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1)
    losses, worst = [], 0.0
    for step in range(steps):
        tokens, targets = batch(batch_size, g, device)
        for model, run, opt in ((ours, run_ours, opt_ours), (twin, run_twin, opt_twin)):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(run, tokens, targets)
            loss.backward()
            if model is ours:
                losses.append(loss.item())
        worst = max(worst, check_gradients(ours, twin, step))
        opt_ours.step()
        opt_twin.step()
        if log and (step % max(1, steps // 20) == 0 or step == steps - 1):
            bar = "#" * int(20 * (step + 1) / steps)
            log(f"\r[{bar:20}] step {step + 1}/{steps} loss {losses[-1]:.3f}", end="", flush=True)
    if log:
        log("")
    return losses, worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["cpu", "cuda", "npu"], default="cpu")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    args = p.parse_args(argv)
    losses, worst = train(args.backend, args.steps, args.batch, args.compile)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} (log(vocab) = {math.log(VOCAB):.3f}); every parameter's "
          f"gradient matched the PyTorch twin at every step (largest difference {worst:.2e})")
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
