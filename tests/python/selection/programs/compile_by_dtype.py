"""A file keyed by dtype: float64 calls are traced (inductor, +x), every other dtype is cpu_alt's."""
from compile_selection import backplane, calls_plugin, code_of, ident, torch

f = torch.compile(lambda t: ident(t) * 2, fullgraph=True, dynamic=False)
x32, x64 = torch.randn(8), torch.randn(8, dtype=torch.float64)
out, code = code_of(f, x64)
assert torch.equal(out, 2 * x64) and not calls_plugin(code), code
out, code = code_of(f, x32)
assert torch.equal(out, -2 * x32) and calls_plugin(code), code
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
assert s.by_dtype == {"float64": ((None, "inductor"),)}, s
assert s.buckets == ((None, "cpu_alt"),), s
assert s.serving == "float64:inductor;*:cpu_alt", s.serving
print("ok")
