"""argv: PLUGIN DIRECTORY DEVICE OP...: the stable plugin PLUGIN loads from DIRECTORY with
exactly OPs, passes the conformance suite and opcheck on DEVICE (test_stable_abi.py)."""
import sys

import torch, backplane

plugin, directory, device, plugin_ops = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
(b,) = backplane.load(plugin, path=directory)
assert (b.status, b.torch_abi, sorted(b.ops)) == ("loaded", "stable", sorted(plugin_ops)), b
outcomes = {(r.op, r.outcome) for r in backplane.check(plugin, list(plugin_ops))}
assert {o for _, o in outcomes} <= {"passed", "skipped"} and {op for op, o in outcomes if o == "passed"} == set(plugin_ops), outcomes
ops = {o.name: o for o in backplane.ops()}
for name in plugin_ops:
    for index in range(len(ops[name].samples)):
        for dtype in (torch.float32, torch.bfloat16):
            args, kwargs = backplane.sample_call(ops[name], index, dtype=dtype, device=device)
            torch.library.opcheck(backplane.torch_op(name).default, args, kwargs)
print("ok")
