"""An HF transformers Llama (4 layers) with every RMSNorm computed by backplane.rms_norm,
against the unmodified model with the same weights: the loss and every parameter's
gradient must match (none left None), then one training step (forward, backward, AdamW)
is timed for both.

    python -m models.llama_check --device cuda [--dtype bfloat16]

Needs `transformers` (on the GPU machine; not a dependency of Backplane).
"""
from __future__ import annotations

import argparse
import copy
import sys
import types

import torch

import backplane


def backplane_rms_norm(self, hidden_states):
    # LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight, as one Backplane op.
    return torch.ops.backplane.rms_norm(hidden_states, self.weight, self.variance_epsilon)


def models(device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    reference = LlamaForCausalLM(config).to(device=device, dtype=dtype)
    ours = copy.deepcopy(reference)
    norms = [m for m in ours.modules() if type(m).__name__ == "LlamaRMSNorm"]
    for m in norms:
        m.forward = types.MethodType(backplane_rms_norm, m)
    return reference, ours, len(norms)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.llama_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = p.parse_args(argv)
    backplane.load(args.device)
    dtype = getattr(torch, args.dtype)
    reference, ours, n_norms = models(args.device, dtype)
    ids = torch.randint(0, 1000, (8, 128), device=args.device)
    losses = []
    for model in (reference, ours):
        loss = model(ids, labels=ids).loss
        loss.backward()
        losses.append(loss.item())
    missing = [n for n, p in ours.named_parameters() if p.grad is None]
    if missing:
        raise SystemExit(f"{len(missing)} parameters got no gradient: {missing[:5]}")
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    worst = 0.0
    for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol, msg=lambda m, name=name: f"{name}: {m}")
        worst = max(worst, (p.grad.float() - q.grad.float()).abs().max().item())
    print(f"Llama, 4 layers, {n_norms} RMSNorms on backplane.rms_norm, {args.dtype} on {args.device}: loss "
          f"{losses[1]:.6f} vs {losses[0]:.6f}; all {sum(1 for _ in ours.parameters())} parameters have gradients "
          f"equal to PyTorch's (largest difference {worst:.2e})")
    if args.device == "cuda":
        from .step_time import median_step_ms, training_step

        ms_ref, ms_ours = (median_step_ms(training_step(m, lambda m=m: m(ids, labels=ids).loss, lr=1e-4), 20, warmup=3)
                           for m in (reference, ours))
        print(f"training step (batch 8 x 128, AdamW), median of 20: PyTorch {ms_ref:.2f} ms, Backplane norms "
              f"{ms_ours:.2f} ms ({ms_ref / ms_ours:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
