"""argv: FIXTURES SELECTION: compiled code (dynamic sizes) follows the selection file's size
rule: cpu_alt (-x) up to 100 elements, cpu above."""
import sys

from size_split import FIXTURES, backplane, ident, large, small, torch

backplane.load("cpu_alt", path=FIXTURES, selection=sys.argv[2])
f = torch.compile(lambda t: ident(t) * 2, fullgraph=True, dynamic=True)
assert torch.equal(f(small), -2 * small) and torch.equal(f(large), 2 * large)
