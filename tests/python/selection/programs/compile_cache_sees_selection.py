"""argv: FIXTURES SELECTION OTHER: Inductor's caches key on the selection in force: the same
function compiled again after another file is applied (and torch._dynamo.reset()) follows
the new file, not the code cached for the old one; back to the first file, the first code,
from the cache (counted by graphs_from_cache(), not listed in resolutions())."""
import sys

from compile_selection import backplane, ident, torch

torch._inductor.config.fx_graph_cache = True
x = torch.randn(64)


def compiled():
    torch._dynamo.reset()
    return torch.compile(lambda t: ident(t) + 1, fullgraph=True, dynamic=False)(x)


assert torch.equal(compiled(), x + 1)  # inductor
backplane.apply_selection(sys.argv[3])  # cpu_alt for every size
assert torch.equal(compiled(), -x + 1)
backplane.apply_selection(sys.argv[2])
rows, hits = len(backplane.compile.resolutions()), backplane.compile.graphs_from_cache()
assert torch.equal(compiled(), x + 1)
# The first file's graph, from the cache: not passed through the pass again, so no rows, counted.
assert backplane.compile.graphs_from_cache() == hits + 1, (hits, backplane.compile.graphs_from_cache())
assert len(backplane.compile.resolutions()) == rows, backplane.compile.resolutions()[rows:]
backplane.apply_selection(None)  # no file: cpu, loaded first (+x), by the extern call
assert torch.equal(compiled(), x + 1)
print("ok")
