"""Eight threads' nested blocks leave the preference they found.
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

import threading
backplane.prefer("identity_conv", "cpu_alt")  # for good: every block must come back to it
def worker(i):
    for n in range(200):
        with backplane.prefer("identity_conv", "cpu" if (i + n) % 2 else "cpu_alt", "cpu"):
            with backplane.prefer("*", "cpu"):
                pass
threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join(120)
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
assert torch.equal(ident(x), -x)
