"""argv: FIXTURE_DIR SELECTION_FILE: the triton-kind fixture beside cpu under
TRITON_INTERPRET=1 (test_triton_kind.py): it serves the CPU key, its ops run through
torch.ops.backplane.* with the core's contract, the core chooses between it and cpu
(prefer, a selection file by size), opcheck and gradients hold."""
import sys
import warnings

import torch

import backplane

warnings.simplefilter("ignore")
fixture_dir, selection = sys.argv[1], sys.argv[2]
backplane.load("cpu")
(b,) = backplane.load("fixture_triton", path=fixture_dir)
assert (b.status, b.kind, b.dispatch_key, b.ops) == ("loaded", "triton", "CPU", ("add", "mul")), b
assert "TRITON_INTERPRET=1" in b.reason and "for tests only" in b.reason, b.reason
(listed,) = [x for x in backplane.backends() if x.name == "fixture_triton"]
assert listed.status == "loaded" and listed.kind == "triton", listed
served = {s.op: s for s in backplane.serving()}
assert served["add"].offered_by == ("cpu", "fixture_triton"), served["add"]
assert served["add"].serving == "cpu", served["add"]  # loaded first
cells = {op.name: op.backends.get("fixture_triton") for op in backplane.ops()}
assert cells["add"] and cells["mul"] and not cells["rms_norm"], cells

a, b_ = torch.randn(4, 8), torch.randn(8)
with backplane.prefer("add", "fixture_triton"), backplane.prefer("mul", "fixture_triton"):
    assert {s.op: s.serving for s in backplane.serving()}["add"] == "fixture_triton"
    torch.testing.assert_close(torch.ops.backplane.add(a, b_, alpha=2.0), a + 2 * b_)
    torch.testing.assert_close(torch.ops.backplane.mul(a, b_), a * b_)  # the Triton kernel, interpreted
    # The contract is the core's: the same message as on the cpu plugin.
    with backplane.prefer("add", "cpu"):
        try:
            torch.ops.backplane.add(a.int(), b_)
        except TypeError as e:
            cpu_message = str(e)
    try:
        torch.ops.backplane.add(a.int(), b_)
        raise AssertionError("int32 accepted")
    except TypeError as e:
        assert str(e) == cpu_message and str(e).startswith("backplane::add: argument 'a' has dtype int32"), str(e)
    # An empty output: the core returns it without calling the launcher.
    assert torch.ops.backplane.add(torch.empty(0, 8), b_).shape == (0, 8)
    # opcheck (schema, FakeTensor, autograd registration) and gradients through it.
    torch.library.opcheck(torch.ops.backplane.add.default, (a, b_), {"alpha": 0.5})
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, q: torch.ops.backplane.mul(p, q), (x, y))
    f = torch.compile(lambda p, q: torch.ops.backplane.add(p, q) * 2, fullgraph=True, backend="eager")
    torch.testing.assert_close(f(a, b_), (a + b_) * 2)

# A selection file: small calls to fixture_triton, larger ones to cpu.
backplane.apply_selection(selection)
(s,) = [s for s in backplane.serving() if s.op == "add"]
assert s.serving == "fixture_triton<=64,cpu", s
torch.testing.assert_close(torch.ops.backplane.add(torch.ones(8), torch.ones(8)), torch.full((8,), 2.0))
backplane.apply_selection(None)
print("ok")
