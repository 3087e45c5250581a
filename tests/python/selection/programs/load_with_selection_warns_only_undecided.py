"""load(..., selection=FILE) holds the "offered by ...; loaded first" warning until the file
is in force: dropped for an op the file decides, kept for one it does not. argv: FIXTURES
FILE EXPECT (decided: the file names identity_conv; undecided: it names another op)."""
import sys
import warnings

import backplane
import torch

backplane.load("cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backplane.load("cpu_alt", path=sys.argv[1], selection=sys.argv[2])
announced = [str(w.message) for w in caught if "identity_conv on CPU is offered by" in str(w.message)]
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
x = torch.randn(6)
if sys.argv[3] == "decided":
    assert not announced, announced
    assert (s.serving, torch.equal(torch.ops.backplane.identity_conv(x), -x)) == ("cpu_alt", True), s
else:
    assert len(announced) == 1 and "'cpu' serves it (loaded first)" in announced[0], caught
    assert s.why == "loaded first", s
print("ok")
