"""What the compile-time selection programs start with (test_compile_selection.py): cpu and
the fixture cpu_alt loaded (cpu_alt's identity_conv returns -x, so each result says who
computed it: the reference, clone(x), gives +x), the selection file sys.argv[2] applied,
and code_of(f, *args): f's result and the code Inductor generated for it."""
import sys
import warnings

import torch

import backplane

warnings.simplefilter("ignore")
FIXTURES = sys.argv[1]
backplane.load("cpu")
backplane.load("cpu_alt", path=FIXTURES, selection=sys.argv[2])
ident = torch.ops.backplane.identity_conv


def code_of(f, *args):
    from torch._inductor.utils import run_and_get_code

    result, code = run_and_get_code(f, *args)
    return result, "\n".join(code)


def calls_plugin(code: str, op: str = "identity_conv") -> bool:
    return f"backplane.{op}" in code or f"backplane::{op}" in code
