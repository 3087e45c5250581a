"""The Triton plugin's tests run its kernels under Triton's interpreter, on CPU tensors:
TRITON_INTERPRET must be set before any kernel module is imported (its @triton.jit
decorators read it), and backends/triton must be importable.

Where the interpreter cannot run a loop bounded by a kernel argument (tests/python/
triton_interpreter.py says which Triton does not), every test here skips, naming the versions
and the error: the row kernels loop so, and half the suite would fail for Triton's reason,
not the plugin's. On such a machine the plugin is checked on its GPU instead
(tests/python/cuda/test_cuda_triton_*)."""
import os
import sys
from pathlib import Path

import pytest

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "backends" / "triton"))


def pytest_collection_modifyitems(config, items):
    from triton_interpreter import fault_in_this_process

    fault = fault_in_this_process()
    if fault:
        here = Path(__file__).parent
        for item in items:
            if here in Path(item.fspath).parents:
                item.add_marker(pytest.mark.skip(reason=fault))

