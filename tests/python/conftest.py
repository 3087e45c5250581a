import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import backplane  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def cpu_backend():
    backplane.load("cpu")
