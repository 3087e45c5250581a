"""Attention's rotary traced (`inductor`) compiles to as many kernels as the same step written
in aten ops, with equal values and gradients. Two things make it so: rotary's output is laid
out as its x (registry `layout: x`: q and k are [B, S, H, D] projections viewed [B, H, S, D]),
so attention's output is transposed back without a copy; and the traced reference keeps
that layout in Inductor (graph_pass._laid_out_as), so the backward's views of it need no
copy either. Without the second, this step launched 6 kernels against aten's 5 (one copy
more per Llama layer)."""
import re

from compile_selection import backplane, calls_plugin, code_of, torch

B, S, H, D = 2, 16, 4, 32
torch.manual_seed(0)
x = torch.randn(B, S, H * D, requires_grad=True)
weights = [torch.randn(H * D, H * D, requires_grad=True) for _ in range(3)]
cos, sin = torch.randn(S, D // 2), torch.randn(S, D // 2)


def rotary_in_aten(x, c, s):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def attention_step(rotary):
    def step(x):
        q, k, v = ((x @ w).view(B, S, H, D).transpose(1, 2) for w in weights)
        o = torch.nn.functional.scaled_dot_product_attention(rotary(q, cos, sin), rotary(k, cos, sin), v, is_causal=True)
        out = o.transpose(1, 2).reshape(B, S, H * D)
        (out * out).sum().backward()
        return out

    return step


def kernel_launches(code: str) -> int:
    """The C++ kernels the generated code calls (Inductor's CPU backend)."""
    return len(re.findall(r"^\s+cpp_fused_\w+\(", code, re.M))


results = {}
for name, rotary in (("backplane", torch.ops.backplane.rotary), ("aten", rotary_in_aten)):
    torch._dynamo.reset()
    for t in (x, *weights):
        t.grad = None
    out, code = code_of(torch.compile(attention_step(rotary), dynamic=False), x)
    results[name] = out, [t.grad for t in (x, *weights)], kernel_launches(code), code
(out, grads, ours, code), (expected, expected_grads, theirs, _) = results["backplane"], results["aten"]
torch.testing.assert_close(out, expected)
torch.testing.assert_close(grads, expected_grads)
assert not calls_plugin(code, "rotary"), code
assert ours == theirs, f"{ours} kernel launches against aten's {theirs}:\n{code}"
assert {r["choice"] for r in backplane.compile.resolutions() if r["op"] == "rotary"} == {"inductor"}
print("ok")
