"""argv: FIXTURE_DIR MODE: the fixture where it cannot serve (test_triton_kind.py). MODE
no_triton: the triton module does not import; no_device: no TRITON_INTERPRET and no CUDA.
Listed as unavailable with the reason; loading it by name raises BackendError with that
reason; nothing else changes (cpu still serves add alone)."""
import os
import sys

fixture_dir, mode = sys.argv[1], sys.argv[2]
if mode == "no_triton":
    sys.modules["triton"] = None  # `import triton` raises ImportError, as where it is not installed

import backplane

backplane.load("cpu")
before = backplane.serving()
os.environ["BACKPLANE_PLUGIN_PATH"] = fixture_dir
(b,) = [b for b in backplane.backends() if b.name == "fixture_triton"]
assert b.status == "unavailable" and b.kind == "triton", b
print("listed:", b.reason)
try:
    backplane.load("fixture_triton")
    raise AssertionError("loaded")
except backplane.BackendError as e:
    assert b.reason in str(e) and "unavailable" in str(e), (str(e), b.reason)
    print("raised:", e)
assert backplane.serving() == before
assert "backplane_fixture_triton" not in sys.modules  # nothing of the plugin ran
print("ok")
