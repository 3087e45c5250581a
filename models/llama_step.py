"""A transformers Llama training step with RMSNorm, the SwiGLU gate and the rotary embedding
on Backplane ops, against the untouched model with the same weights, in one process:
gradients first (equal within the dtype's tolerance, none missing), then the step time
(forward, backward, AdamW; CUDA events, median, the two models timed in alternation) and the GPU time per step (the profiler's
kernel time), eager and under torch.compile. Apply a selection file (`backplane tune --mode
compile`) with --selection, or none for the plugins alone.

    python -m models.llama_step --size small [--selection sel.yaml]   # 4 layers, hidden 1024, 4 x 256
    python -m models.llama_step --size 8b                              # 2 layers of Llama-3-8B's shape, 1 x 4096

Needs `transformers` and a CUDA device (the GPU machine; not a dependency of Backplane).
The rotary patch replaces transformers' module-level apply_rotary_pos_emb while the
Backplane model runs (a flag read at call time: compiled code guards on it).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import types

import torch

import backplane

from .step_time import median_step_ms

SIZES = {
    "small": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                  num_key_value_heads=16, batch=4, seq=256),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=2, num_attention_heads=32,
               num_key_value_heads=8, batch=1, seq=4096),
}
_ON = {"backplane": False}


def _rms_norm(self, hidden_states):
    return torch.ops.backplane.rms_norm(hidden_states, self.weight, self.variance_epsilon)


def _mlp(self, x):
    return self.down_proj(torch.ops.backplane.silu_mul(self.gate_proj(x), self.up_proj(x)))


def _patch_rotary(modeling):
    original = modeling.apply_rotary_pos_emb

    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        if not _ON["backplane"]:
            return original(q, k, cos, sin, *args, **kwargs)
        half = q.shape[-1] // 2  # transformers' cos/sin repeat their halves: [B, S, D]
        c, s = cos[..., :half].unsqueeze(1), sin[..., :half].unsqueeze(1)
        return torch.ops.backplane.rotary(q, c, s), torch.ops.backplane.rotary(k, c, s)

    modeling.apply_rotary_pos_emb = apply_rotary_pos_emb


def models(size: str, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    shape = {k: v for k, v in SIZES[size].items() if k not in ("batch", "seq")}
    config = LlamaConfig(vocab_size=32000, max_position_embeddings=8192, attn_implementation="sdpa", **shape)
    torch.manual_seed(0)
    reference = LlamaForCausalLM(config).to(device=device, dtype=dtype)
    ours = copy.deepcopy(reference)
    for m in ours.modules():
        if type(m).__name__ == "LlamaRMSNorm":
            m.forward = types.MethodType(_rms_norm, m)
        elif type(m).__name__ == "LlamaMLP":
            m.forward = types.MethodType(_mlp, m)
    _patch_rotary(modeling_llama)
    return reference, ours


def _loss(model, ids, backplane_on: bool):
    _ON["backplane"] = backplane_on
    return model(ids, labels=ids).loss


def check_gradients(reference, ours, ids, dtype) -> float:
    losses = []
    for model, on in ((reference, False), (ours, True)):
        loss = _loss(model, ids, on)
        loss.backward()
        losses.append(loss.item())
    tol, worst = _compare_gradients(reference, ours, dtype, "eager")
    print(f"gradients: loss {losses[1]:.5f} (Backplane) vs {losses[0]:.5f}; every parameter's gradient equal "
          f"within {tol} (largest difference {worst:.2e})")
    return worst


def _compare_gradients(reference, ours, dtype, what: str):
    """Every parameter's gradient of `ours` against `reference`'s (then cleared): (tolerance, largest difference)."""
    missing = [n for n, p in ours.named_parameters() if p.grad is None]
    if missing:
        raise SystemExit(f"{what}: {len(missing)} parameters got no gradient: {missing[:5]}")
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    worst = 0.0
    for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol, msg=lambda m, name=name: f"{what} {name}: {m}")
        worst = max(worst, (p.grad.float() - q.grad.float()).abs().max().item())
        p.grad = q.grad = None
    return tol, worst


def _step(model, ids, on: bool, compiled: bool):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    forward = torch.compile(lambda: _loss(model, ids, on)) if compiled else (lambda: _loss(model, ids, on))

    def step():
        _ON["backplane"] = on
        opt.zero_grad(set_to_none=True)
        forward().backward()
        opt.step()

    return step, forward


def check_compiled_gradients(reference, ours, forward_ours, ids, dtype) -> None:
    """The compiled Backplane model's loss and gradients against the eager untouched model's."""
    _loss(reference, ids, False).backward()
    _ON["backplane"] = True
    forward_ours().backward()
    tol, worst = _compare_gradients(reference, ours, dtype, "compiled")
    print(f"compiled gradients equal the eager untouched model's within {tol} (largest difference {worst:.2e})")


def interleaved_step_ms(steps, repeats: int, warmup: int = 5) -> list[float]:
    """Median CUDA-event time of each step function, timed in alternation (one call of
    each per round), so drift in clocks or host load falls on all of them alike."""
    for step in steps:
        for _ in range(warmup):
            step()
    times = [[] for _ in steps]
    for _ in range(repeats):
        for step, t in zip(steps, times):
            t.append(median_step_ms(step, 1, 0))
    return [statistics.median(t) for t in times]


def print_host_profile(name: str, step, steps: int = 5, top: int = 12) -> dict[str, int]:
    """The host side of `steps` steps: the profiler's CPU events with the most self time.
    Returns the GPU kernels launched a step, by name, with their counts."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    averages = prof.key_averages()
    host = sorted((e for e in averages if e.self_cpu_time_total > 0), key=lambda e: e.self_cpu_time_total,
                  reverse=True)
    total = sum(e.self_cpu_time_total for e in host) / 1000 / steps
    print(f"host profile, {name}: {total:.3f} ms of CPU self time a step, {sum(e.count for e in host) // steps} "
          f"events a step; the {top} largest (ms a step, calls a step):")
    for e in host[:top]:
        print(f"  {e.self_cpu_time_total / 1000 / steps:8.3f} {e.count // steps:6d}  {e.key[:90]}")
    return {e.key: e.count // steps for e in averages if e.self_device_time_total > 0 and e.self_cpu_time_total == 0}


def print_kernel_difference(kernels: list[dict[str, int]]) -> None:
    """The GPU kernels whose launches a step differ between the two models."""
    theirs, ours = kernels
    print(f"GPU kernels a step: PyTorch {sum(theirs.values())}, Backplane {sum(ours.values())}; those that differ "
          "(PyTorch, Backplane, name):")
    for name in sorted(set(theirs) | set(ours)):
        if theirs.get(name, 0) != ours.get(name, 0):
            print(f"  {theirs.get(name, 0):4d} {ours.get(name, 0):4d}  {name[:100]}")


def gpu_ms(step, steps: int = 5) -> float:
    """Kernel time per step: the profiler's CUDA self time over `steps` steps."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    total_us = sum(e.self_device_time_total for e in prof.key_averages())
    return total_us / 1000 / steps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.llama_step", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    p.add_argument("--selection", help="a selection file to apply (backplane tune writes one)")
    p.add_argument("--backends", default="cuda",
                   help="plugins to load, comma-separated (default cuda; cuda,triton for the Triton plugin)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--host-profile", action="store_true",
                   help="also print each step's largest host-side (CPU) profiler events")
    args = p.parse_args(argv)
    backplane.load(*args.backends.split(","), selection=args.selection)
    dtype = getattr(torch, args.dtype)
    reference, ours = models(args.size, "cuda", dtype)
    spec = SIZES[args.size]
    ids = torch.randint(0, 32000, (spec["batch"], spec["seq"]), device="cuda")
    print(f"Llama {args.size}: {spec}, {args.dtype}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"selection {backplane.selection_file() or 'none'}")
    check_gradients(reference, ours, ids, dtype)
    for mode in args.modes.split(","):
        compiled = mode == "compile"
        (ref_step, _), (our_step, our_forward) = _step(reference, ids, False, compiled), _step(ours, ids, True, compiled)
        if compiled:
            check_compiled_gradients(reference, ours, our_forward, ids, dtype)
        steps = [ref_step, our_step]
        ms = interleaved_step_ms(steps, args.repeats)
        gpu = [gpu_ms(s) for s in steps]
        print(f"{mode:8} step: PyTorch {ms[0]:.3f} ms, Backplane {ms[1]:.3f} ms ({ms[0] / ms[1]:.3f}x); GPU time "
              f"per step: PyTorch {gpu[0]:.3f} ms, Backplane {gpu[1]:.3f} ms ({gpu[1] / gpu[0]:.3f} of PyTorch's)")
        if args.host_profile:
            print_kernel_difference([print_host_profile(f"{mode} {name}", s)
                                     for name, s in zip(("PyTorch", "Backplane"), steps)])
    if "compile" in args.modes:
        chosen = {}
        for r in backplane.compile.resolutions():
            chosen.setdefault(r["op"], set()).add(r["choice"])
        cached = backplane.compile.graphs_from_cache()
        print("compile-time choices: " + (", ".join(f"{op}: {'/'.join(sorted(c))}" for op, c in sorted(chosen.items()))
                                          or "none recorded (no inductor bucket in force)")
              + (f"; {cached} graph(s) from Inductor's cache, whose choices are not recorded" if cached else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
