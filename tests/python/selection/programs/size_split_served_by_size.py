"""argv: FIXTURES SELECTION: cpu_alt loaded with the selection file SELECTION (cpu_alt up to
100 elements, cpu above): calls are served by size, serving() says which bucket, and a
preference for the op (not one for every op) wins over the file."""
import sys

from size_split import FIXTURES, backplane, large, served, small, torch

path = sys.argv[2]
backplane.load("cpu_alt", path=FIXTURES, selection=path)
assert (served(small), served(large)) == ("cpu_alt", "cpu")
assert served(torch.randn(10, 10)) == "cpu_alt", "100 elements: the first bucket's last size"
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
assert s.serving == "cpu_alt<=100,cpu", s
assert s.buckets == ((100, "cpu_alt"), (None, "cpu")), s
assert s.why == (f"selection file {path}, bucket 1 (0 to 100 elements): cpu_alt; "
                 "bucket 2 (more than 100 elements): cpu"), s.why
assert backplane.selection_file() == path
# A preference for the op itself wins over the file; the file applies again after it.
with backplane.prefer("identity_conv", "cpu"):
    assert served(small) == "cpu"
assert served(small) == "cpu_alt"
# A preference for every op does not.
with backplane.prefer("*", "cpu"):
    assert served(small) == "cpu_alt"
backplane.apply_selection(None)
assert (served(small), served(large), backplane.selection_file()) == ("cpu", "cpu", "")
