"""What the programs of test_selection.py and test_hardening_selection.py start with: cpu,
then the fixture cpu_alt (identity_conv = -x) from the folder sys.argv[1], its warnings in
`caught`; `x`, a tensor, and `ident`, torch.ops.backplane.identity_conv. A program here
imports it (`from cpu_and_cpu_alt import ...`): a program's own folder is the first entry
of its sys.path."""
import sys

import warnings, torch, backplane
backplane.load("cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backplane.load("cpu_alt", path=sys.argv[1])
x = torch.randn(6)
ident = torch.ops.backplane.identity_conv
