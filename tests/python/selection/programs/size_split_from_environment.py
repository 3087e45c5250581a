"""argv: FIXTURES: cpu_alt loaded under $BACKPLANE_SELECTION: the split applies; prints the
op's `why`."""
from size_split import FIXTURES, backplane, large, served, small

backplane.load("cpu_alt", path=FIXTURES)
assert (served(small), served(large)) == ("cpu_alt", "cpu")
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
print(s.why)
