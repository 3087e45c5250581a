"""Compiles every kernel variant the launchers choose, for sm_90, on a machine without a
GPU: each Triton launch is replaced by triton.compile for that target (with the
specialization Triton itself would use: 16-byte aligned pointers, integers divisible by
16, integers equal to 1), and tuning compiles every candidate configuration. Prints one
JSON line per compiled launch; exits 1 on the first failure.

Run in a fresh process without TRITON_INTERPRET (the interpreter replaces the kernels)."""
import json
import os
import re
import sys
from pathlib import Path

assert os.environ.get("TRITON_INTERPRET", "0") != "1", "run without TRITON_INTERPRET"
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "backends" / "triton"))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import backplane_triton  # noqa: E402
from backplane_triton import elementwise, layout, rows, tuning  # noqa: E402
from backplane_triton.kernels import rms_norm_backward  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def compile_launch(self, *args, grid, warmup, **kwargs):
    num_warps = kwargs.pop("num_warps", 4)
    values = dict(zip(self.arg_names, args), **kwargs)
    signature, constants, attrs = {}, {}, {}
    for i, (name, param) in enumerate(zip(self.arg_names, self.params)):
        v = values[name]
        if param.is_constexpr or isinstance(v, bool) or (isinstance(v, int) and v == 1):
            signature[name], constants[name] = "constexpr", v
            continue
        if isinstance(v, torch.Tensor):
            signature[name] = "*" + TYPES[v.dtype]
            aligned = v.data_ptr() % 16 == 0
        elif isinstance(v, int):
            signature[name] = "i32" if -2**31 <= v < 2**31 else "i64"
            aligned = v % 16 == 0
        else:
            signature[name], aligned = param.annotation_type or "fp32", False
        if aligned:
            attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(self, signature, constants, attrs), target=TARGET,
                              options={"num_warps": num_warps})
    ptx = compiled.asm["ptx"]
    print(json.dumps({
        "kernel": f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.__name__}",
        "constants": {k: getattr(v, "__name__", str(v)) for k, v in kwargs.items()},
        "num_warps": num_warps, "shared": compiled.metadata.shared,
        "vector_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.v[24]", ptx)),
        "vector_stores": len(re.findall(r"st\.global(?:\.\w+)*\.v[24]", ptx)),
    }), flush=True)


def every_candidate(key, candidates, launch):
    for candidate in candidates[1:]:
        launch(candidate)
    return candidates[0]


JITFunction.run = compile_launch
tuning.pick = every_candidate
for module in (layout, elementwise, rms_norm_backward):
    module.multiprocessors = lambda t: 132  # an H200's


def calls(dt):
    """(op, outputs, arguments): the bench's shapes, smaller, and the views each path takes."""
    E = lambda *s: torch.empty(*s, dtype=dt)  # noqa: E731
    x, w = E(256, 4096), E(4096)
    xt = E(4096, 256).t()
    x3 = E(8, 4, 4, 256).permute(2, 1, 0, 3)
    a, b = E(1 << 20), E(1 << 20)
    yield "add", [E(1 << 20)], (a, b, 2.0)
    yield "add", [E(1024, 1024)], (E(1024, 1024), E(1024, 1024).t(), 1.0)
    yield "add", [E(1024, 1024)], (E(1024, 2048)[:, ::2], E(1024), 1.0)
    yield "add", [E(4, 4, 4, 8)], (E(8, 4, 4, 4).permute(3, 2, 1, 0), E(4, 4, 4, 8), 1.0)
    yield "add", [E(4096)], (E(()), E(4096), 1.0)
    yield "mul", [E(1 << 20)], (a, b)
    yield "silu_mul", [E(256, 2048)], (E(256, 4096)[:, :2048], E(256, 4096)[:, 2048:])
    yield "silu_mul_backward", [E(1 << 20), E(1 << 20)], (a, b, E(1 << 20))
    yield "silu_mul_backward", [E(64, 64), E(64, 64)], (E(64, 64), E(64, 64).t(), E(64))
    for xv in (x, xt, x3, E(4, 20000)):
        yield "rms_norm", [E(xv.shape)], (xv, w[:xv.shape[-1]] if xv.shape[-1] <= 4096 else E(xv.shape[-1]), 1e-6)
        weight = E(xv.shape[-1])
        yield "rms_norm_backward", [E(xv.shape), E(xv.shape[-1])], (xv, xv, weight, 1e-6)
    for xv in (x, xt, x3, E(8, 32000), E(2, 70000)):
        yield "softmax", [E(xv.shape)], (xv,)
        yield "softmax_backward", [E(xv.shape)], (xv, xv)
    yield "rotary", [E(2, 8, 256, 128)], (E(2, 8, 256, 128), E(256, 64), E(256, 64))
    qkv = E(2, 256, 3, 8, 128)
    yield "rotary", [E(2, 8, 256, 128)], (qkv[:, :, 0].transpose(1, 2), E(256, 64), E(256, 64))


def first_of_each_op(dtype):
    seen = set()
    for op, outs, args in calls(dtype):
        if op not in seen:
            seen.add(op)
            yield op, outs, args


launchers = backplane_triton.kernels()
for dtype, selection in [(torch.bfloat16, calls), (torch.float32, calls), (torch.float16, first_of_each_op),
                         (torch.float64, first_of_each_op)]:
    for op, outs, args in selection(dtype):
        launchers[op](*outs, *args)
# The 64-bit index code of every kernel family (planned afresh: plans are cached per layout).
rows.needs_int64 = elementwise.needs_int64 = lambda *tensors: True
rows._plans.clear()
elementwise._plans.clear()
for op, outs, args in first_of_each_op(torch.bfloat16):
    launchers[op](*outs, *args)
