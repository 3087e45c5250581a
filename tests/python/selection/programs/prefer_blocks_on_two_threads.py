"""With-blocks on two threads are undone exactly, in any order: A enters, B enters,
A leaves (B's preference stays), B leaves (none stays).
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

import threading
steps = {name: threading.Event() for name in ("a_in", "b_in", "a_out")}
seen = {}
def a():
    with backplane.prefer("identity_conv", "cpu_alt"):
        steps["a_in"].set()
        steps["b_in"].wait(60)
    steps["a_out"].set()
def b():
    steps["a_in"].wait(60)
    with backplane.prefer("identity_conv", "cpu"):
        steps["b_in"].set()
        steps["a_out"].wait(60)
        seen["inside b after a left"] = backplane.preferences()
threads = [threading.Thread(target=f) for f in (a, b)]
for t in threads: t.start()
for t in threads: t.join(60)
assert seen == {"inside b after a left": "identity_conv:cpu"}, seen
assert backplane.preferences() == "", "no block's preference may outlive it: " + backplane.preferences()
assert torch.equal(ident(x), x)
