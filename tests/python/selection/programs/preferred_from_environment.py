"""cpu_alt serves identity_conv as $BACKPLANE_PREFER says.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import ident, torch, x

assert torch.equal(ident(x), -x)
