"""A Llama-style decoder laid out for tensor parallelism, and torchtitan's plan for it.

models.train's DecoderLM fuses q, k, v (and gate, up) into one weight and ties the output
to the embedding; ColwiseParallel would give each rank a slice across the fused parts.
Here every projection is its own nn.Linear and every norm its own module, as torchtitan's
Llama has them. The ops the Backplane and PyTorch versions differ in (rms_norm, add,
silu_mul, rotary) are models.train's Ops: one flag switches the whole model.

parallelize(model, mesh) applies torchtitan's plan: the residual stream is sharded over the
sequence (Shard(1) DTensors: the norms run under SequenceParallel and the residual adds
on the shards); attention and the MLP all-gather their input, run q/k/v and gate/up
column-parallel, rotary, attention and silu_mul on each rank's heads and hidden columns
(plain local tensors), and reduce-scatter the row-parallel out/down projections back to
the sequence shards. Four collectives per block forward, and three outside the blocks.
Limits: multi-head attention only (no grouped kv heads); heads, hidden, vocab and
sequence must divide by the mesh size.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

from .train import Ops, rotary_cache


@dataclass(frozen=True)
class Shape:
    vocab: int
    dim: int
    heads: int
    hidden: int
    layers: int
    seq: int  # positions in the rotary cache: the longest sequence the model reads

    def check_divides(self, world: int) -> None:
        """Raises SystemExit naming the first size the mesh does not split evenly."""
        for name in ("heads", "hidden", "vocab", "seq"):
            if getattr(self, name) % world:
                raise SystemExit(f"--{name} {getattr(self, name)} does not split over {world} ranks")
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            raise SystemExit(f"--dim {self.dim} must be --heads {self.heads} times an even head size")


class RMSNorm(torch.nn.Module):
    def __init__(self, ops: Ops, dim: int):
        super().__init__()
        self.ops = ops
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.ops.rms_norm(x, self.weight)


class Attention(torch.nn.Module):
    def __init__(self, ops: Ops, shape: Shape):
        super().__init__()
        self.ops, self.head_dim = ops, shape.dim // shape.heads
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(shape.dim, shape.dim, bias=False) for _ in range(4))

    def forward(self, h, cos, sin):
        batch, seq, _ = h.shape
        # -1 heads: all of them on one device, this rank's share under ColwiseParallel.
        q, k, v = (w(h).view(batch, seq, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = self.ops.rotary(q, cos, sin), self.ops.rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(a.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(torch.nn.Module):
    def __init__(self, ops: Ops, shape: Shape):
        super().__init__()
        self.ops = ops
        self.gate, self.up = (torch.nn.Linear(shape.dim, shape.hidden, bias=False) for _ in range(2))
        self.down = torch.nn.Linear(shape.hidden, shape.dim, bias=False)

    def forward(self, h):
        return self.down(self.ops.silu_mul(self.gate(h), self.up(h)))


class Block(torch.nn.Module):
    def __init__(self, ops: Ops, shape: Shape):
        super().__init__()
        self.ops = ops
        self.attention_norm, self.ffn_norm = RMSNorm(ops, shape.dim), RMSNorm(ops, shape.dim)
        self.attention, self.feed_forward = Attention(ops, shape), FeedForward(ops, shape)

    def forward(self, x, cos, sin):
        x = self.ops.add(x, self.attention(self.attention_norm(x), cos, sin))
        return self.ops.add(x, self.feed_forward(self.ffn_norm(x)))


class LlamaDecoder(torch.nn.Module):
    """Built on the current default device with the current global RNG: seed it alike on
    every rank (torch.manual_seed) for equal weights."""

    def __init__(self, shape: Shape, use_backplane: bool):
        super().__init__()
        self.ops = Ops(use_backplane)
        self.tok_embeddings = torch.nn.Embedding(shape.vocab, shape.dim)
        self.layers = torch.nn.ModuleList(Block(self.ops, shape) for _ in range(shape.layers))
        self.norm = RMSNorm(self.ops, shape.dim)
        self.output = torch.nn.Linear(shape.dim, shape.vocab, bias=False)
        cos, sin = rotary_cache(shape.seq, shape.dim // shape.heads)
        # Buffers, so model.to(dtype) casts them with the weights: rotary takes one dtype for all.
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        seq = tokens.shape[1]
        cos, sin = self.cos[:seq], self.sin[:seq]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def parallelize(model: LlamaDecoder, mesh) -> LlamaDecoder:
    """Shards `model` in place over the 1-D device mesh, torchtitan's plan (module doc);
    the logits come out whole (Replicate) on every rank as plain tensors."""
    parallelize_module(model, mesh, {
        # use_local_output=False keeps the residual stream a Shard(1) DTensor end to end.
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1), use_local_output=False),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers:
        parallelize_module(block, mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                            desired_input_layouts=(Replicate(), None, None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.gate": ColwiseParallel(),
            "feed_forward.up": ColwiseParallel(),
            "feed_forward.down": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        })
    return model


def token_batch(shape: Shape, batch: int, device):
    """Random tokens and their next-token targets, the same on every rank (one seed)."""
    tokens = torch.randint(0, shape.vocab, (batch, shape.seq), generator=torch.Generator().manual_seed(1))
    return tokens.to(device), tokens.roll(-1, dims=1).to(device)


def loss_of(logits, targets):
    """Next-token cross-entropy, computed in float32 whatever the logits' dtype."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def forward_collectives(layers: int) -> int:
    """The collectives one forward of the plan needs: per block an all-gather before
    attention and the MLP and a reduce-scatter after each; outside, the embedding's
    reduce-scatter and the output's two all-gathers (its input, its logits)."""
    return 4 * layers + 3


def backward_collectives(layers: int) -> int:
    """The collectives one backward needs: each of the forward's, transposed (an all-gather
    becomes a reduce-scatter and back), but the logits' gather, whose gradient each rank
    slices locally. The replicated norm weights' gradients stay Partial: they are summed
    over ranks when read (by the optimizer), not in the backward."""
    return 4 * layers + 2
