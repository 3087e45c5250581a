"""Dynamic shapes: the size is symbolic, so the bucket boundary (100 elements) becomes a
guard: sizes on one side share one graph, a size across it recompiles and takes the other
bucket."""
from compile_selection import backplane, ident, torch

graphs = []


def counting(gm, example_inputs):
    graphs.append(gm)
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


f = torch.compile(lambda t: ident(t) * 2, backend=counting, fullgraph=True, dynamic=True)
for n, sign, compiles in [(40, 1, 1), (90, 1, 1), (100, 1, 1), (101, -1, 2), (5000, -1, 2), (7, 1, 2)]:
    x = torch.randn(n)
    assert torch.equal(f(x), sign * 2 * x), (n, sign)
    assert len(graphs) == compiles, (n, len(graphs))
print("ok")
