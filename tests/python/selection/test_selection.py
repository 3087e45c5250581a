"""Two CPU plugins serving one device: cpu and the fixture cpu_alt, whose identity_conv
returns -x. Each test runs in a child process, so this session's plugins stay as they are."""
import os
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
FIXTURES = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane")).parent.parent / "tests" / "fixtures"

PRELUDE = f"""
import warnings, torch, backplane
backplane.load("cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backplane.load("cpu_alt", path={str(FIXTURES)!r})
x = torch.randn(6)
ident = torch.ops.backplane.identity_conv
"""


def run(code, **env):
    r = run_python(PRELUDE + code, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_conflict_is_announced_and_first_loaded_serves():
    out = run("""
assert any("identity_conv on CPU is offered by 'cpu', 'cpu_alt'" in str(w.message) for w in caught), caught
assert torch.equal(ident(x), x)
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
assert (s.serving, s.why, s.offered_by) == ("cpu", "loaded first", ("cpu", "cpu_alt")), s
print("ok")
""")
    assert "ok" in out


def test_prefer_switches_at_once_and_as_a_context_manager():
    run("""
backplane.prefer("identity_conv", "cpu_alt")
assert torch.equal(ident(x), -x)
with backplane.prefer("identity_conv", "cpu"):
    assert torch.equal(ident(x), x)
assert torch.equal(ident(x), -x), "the context manager restores the earlier preference"
backplane.prefer("identity_conv")  # cleared: the default rule again
assert torch.equal(ident(x), x)
assert backplane.preferences() == ""
""")


def test_environment_preference():
    run("assert torch.equal(ident(x), -x)", BACKPLANE_PREFER="identity_conv:cpu_alt,cpu")


@pytest.mark.slow
def test_compiled_code_honours_a_switch():
    run("""
f = torch.compile(lambda t: ident(t) * 2, fullgraph=True)
assert torch.equal(f(x), 2 * x)
with backplane.prefer("identity_conv", "cpu_alt"):
    assert torch.equal(f(x), -2 * x), "compiled code must call the plugin chosen now"
assert torch.equal(f(x), 2 * x)
""")


def test_check_runs_the_named_plugin_even_when_another_serves():
    run("""
alt = {r.outcome for r in backplane.check("cpu_alt", ["identity_conv"])}
assert "failed" in alt, alt  # cpu_alt's -x is checked, not cpu's kernel
assert {r.outcome for r in backplane.check("cpu", ["identity_conv"])} <= {"passed", "skipped"}
(missing,) = backplane.check("cpu_alt", ["mul"])
assert (missing.outcome, missing.detail) == ("not implemented", "not implemented on cpu_alt")
assert torch.equal(ident(x), x), "check leaves the preferences as they were"
""")


def test_bad_preference_is_a_clear_error():
    run("""
import pytest
with pytest.raises(ValueError, match="preference 'nosuch:cpu': no op 'nosuch' in the registry"):
    backplane.prefer("nosuch", "cpu")
with pytest.raises(ValueError, match="'a,b' is not a plugin name"):
    backplane.prefer("identity_conv", "a,b")
""")
