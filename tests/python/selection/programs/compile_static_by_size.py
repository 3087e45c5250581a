"""Static shapes: the `inductor` bucket (up to 100 elements) is traced into the graph (+x,
no call of the op in the code), larger calls stay cpu_alt's (-x); eager calls of the small
size are served by the plugin the rule without the file picks (cpu, loaded first)."""
from compile_selection import backplane, calls_plugin, code_of, ident, torch

small, large = torch.randn(100), torch.randn(101)
f = torch.compile(lambda t: ident(t) * 2, fullgraph=True, dynamic=False)
out, code = code_of(f, small)
assert torch.equal(out, 2 * small) and not calls_plugin(code), code
out, code = code_of(f, large)
assert torch.equal(out, -2 * large) and calls_plugin(code), code
assert torch.equal(ident(small), small) and torch.equal(ident(large), -large)  # eager
chosen = [(r["size"], r["choice"]) for r in backplane.compile.resolutions() if r["op"] == "identity_conv"]
assert chosen == [(100, "inductor"), (101, "cpu_alt")], chosen
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
assert s.buckets == ((100, "inductor"), (None, "cpu_alt")), s
assert "inductor (compiled code; eager calls: cpu)" in s.why, s.why
print("ok")
