"""argv: FIXTURE_DIR: threads that take the GIL and the loader's mutex in every order the
bridge allows (test_triton_kind.py): calls of a triton plugin's kernel (the kernel takes the
GIL), listings (the loader's mutex, then the GIL for target()), loads and the conformance
suite (ctypes: the GIL released, the kernel takes it back on that thread). A deadlock hangs
this program, which the test's timeout turns into a failure."""
import sys
import threading
import time
import warnings

import torch

import backplane

warnings.simplefilter("ignore")
backplane.load("cpu")
backplane.load("fixture_triton", path=sys.argv[1])
backplane.prefer("add", "fixture_triton")
stop = time.monotonic() + 3
errors = []


def loop(body):
    def run():
        try:
            while time.monotonic() < stop:
                body()
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(repr(e))
    return threading.Thread(target=run)


a = torch.randn(64)
threads = [
    loop(lambda: torch.testing.assert_close(torch.ops.backplane.add(a, a), 2 * a)),
    loop(lambda: torch.testing.assert_close(torch.ops.backplane.add(a, a, alpha=3), 4 * a)),
    loop(lambda: [b for b in backplane.backends() if b.name == "fixture_triton"]),
    loop(lambda: backplane.load("fixture_triton", path=sys.argv[1])),
    loop(lambda: backplane.check("fixture_triton", ops="add", gradients=False)),
    loop(backplane.serving),
]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors[:3]
print("ok")
