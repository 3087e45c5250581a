"""A plugin's own ops (docs/vendor-ops.md), through the fixture plugin `acme`: its registry
fragment (tests/fixtures/vendor/acme_ops.yaml) defines acme::fused_gelu, acme::clamp_ and
acme::gelu (a str argument with `choices:`), which get schemas, Meta kernels, autograd, the conformance suite, opcheck, the CLI and the
bench like the core's ops; `acme_clash` redefines one and is refused. Each test runs in a
child process: defined ops stay defined for the life of a process."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
FRAGMENT = FIXTURES / "libbackplane_acme.ops.yaml"

PROGRAMS = Path(__file__).with_name("programs")  # each starts with programs/acme_prelude.py


def env():
    full = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    full.pop("BACKPLANE_BACKENDS", None)
    return full


def python(program, *args, acme_path=FIXTURES):
    """Runs programs/`program` with acme loaded from acme_path (its sys.argv[1]) and `args` after it."""
    r = run_python(PROGRAMS / program, acme_path, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def cli(*args):
    return subprocess.run([str(BACKPLANE), *args], capture_output=True, text=True, env=env(), timeout=300)


def test_vendor_ops_are_listed_and_compute():
    python("acme_listed_and_compute.py")


def test_conformance_opcheck_gradcheck_and_compile():
    python("acme_conformance_and_compile.py")


def test_a_colliding_fragment_is_refused_naming_both_files_and_lines():
    python("acme_clash_refused.py", FIXTURES / "clash", FIXTURES / "clash" / "libbackplane_acme_clash.ops.yaml",
           FRAGMENT)


def test_cli_lists_checks_and_benchmarks_vendor_ops():
    listed = cli("ops", "--backends", "cpu,acme", "--plugin-path", str(FIXTURES))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    columns = lines[0].split()[1:3]  # the backends, in the table's order
    row = next(line for line in lines if line.startswith("acme::fused_gelu"))
    cells = dict(zip(columns, row.split()[1:3]))
    assert cells == {"cpu": "-", "acme": "yes"}, listed.stdout  # cpu lacks it, acme has it
    checked = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::fused_gelu")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"acme::fused_gelu +[1-9][0-9]* +0 ", checked.stdout), checked.stdout  # passed, none failed
    unknown = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::nosuch")
    assert unknown.returncode == 2 and "no op 'acme::nosuch'" in unknown.stderr, unknown.stderr
    bench = cli("bench", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::fused_gelu",
                "--dtypes", "float32", "--min-time", "0.01", "--repetitions", "1")
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    assert "acme::fused_gelu" in bench.stdout and "FAILED:" not in bench.stdout, bench.stdout[-2000:]


def test_a_str_argument_comes_from_samples_errors_and_bench_and_the_contract_checks_it():
    """acme::gelu(Tensor x, *, str approximate='none'), choices [none, tanh]: its samples and
    bench preset give 'tanh' (through the C interface to Python too), its `errors:` case
    gives a bad string, and the contract refuses that string before the kernel (which passes
    it on unchecked) on the CPU and under Meta alike."""
    python("acme_str_argument.py")
    checked = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::gelu")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"acme::gelu +[1-9][0-9]* +0 +0", checked.stdout), checked.stdout
    bench = cli("bench", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::gelu",
                "--dtypes", "float32", "--min-time", "0.01", "--repetitions", "1")
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    row = next((line for line in bench.stdout.splitlines() if line.startswith("acme::gelu ")), "")
    assert row.split()[1:4] == ["1M_tanh", "float32", "acme"], bench.stdout[-2000:]
    assert "FAILED:" not in bench.stdout, bench.stdout[-2000:]


def _acme_copy(tmp_path, *replacements):
    """The acme fixture plugin copied into tmp_path, its fragment's text edited by each
    (old, new) replacement (each must be there: the fixture changed otherwise)."""
    for f in FIXTURES.glob("libbackplane_acme.*"):
        shutil.copy(f, tmp_path)
    fragment = tmp_path / "libbackplane_acme.ops.yaml"
    text = fragment.read_text()
    for old, new in replacements:
        assert old in text, f"the fixture's fragment changed: update this test ({old!r})"
        text = text.replace(old, new)
    fragment.write_text(text)
    return tmp_path


def _outcomes(folder, op):
    """{sample name: its cases' outcomes, sorted} of backplane.check for op, with acme
    loaded from folder; the contract's and the entry's error cases left out."""
    out = python("acme_check_outcomes.py", op, acme_path=folder)
    return json.loads(out.strip().splitlines()[-1])


def test_conformance_runs_each_sample_with_its_string(tmp_path):
    """A copy of acme whose gelu reference drops `approximate` (plain erf gelu): the sample
    without the string still passes, the 'tanh' samples fail, so the suite called the
    kernel with 'tanh'."""
    folder = _acme_copy(tmp_path, ("reference: aten::gelu(x, approximate=approximate)", "reference: aten::gelu(x)"))
    found = _outcomes(folder, "acme::gelu")
    assert found["x=[4, 33]"] == ["passed"], found
    assert "failed" in found["tanh"] and "failed" in found["tanh_three_d"], found


def test_conformance_draws_a_samples_values_at_its_magnitude(tmp_path):
    """A copy of acme whose clamp_ claims to be the identity (reference aten::clone(x)) for
    bounds of +-100: true of N(0, 1) values, false at magnitude 1000, where the kernel
    clamps. The conformance inputs (C++) scale by the sample's magnitude."""
    folder = _acme_copy(tmp_path, ("reference: aten::clamp(x, lo, hi)", "reference: aten::clone(x)"),
                        ("- {x: [4, 33], lo: -0.5, hi: 0.5}",
                         "- {name: small, x: [4, 33], lo: -100.0, hi: 100.0}\n"
                         "      - {name: large, x: [4, 33], lo: -100.0, hi: 100.0, magnitude: 1000}"))
    found = _outcomes(folder, "acme::clamp_")
    assert found["small"] == ["passed"], found
    assert found["large"] == ["failed"], found


@pytest.mark.slow
def test_backplane_run_names_the_plugin_a_package_needs_for_its_vendor_ops(tmp_path):
    """An AOTInductor package calling acme::fused_gelu: `backplane run` without acme names
    acme as the plugin to load (found through its fragment on the search path); with it,
    the package runs and matches its reference."""
    python("acme_package.py", tmp_path)
    run = ("run", str(tmp_path / "m.pt2"), "--input", str(tmp_path / "io.pt"), "--repeat", "1")
    env_path = {"BACKPLANE_PLUGIN_PATH": str(FIXTURES)}
    without = subprocess.run([str(BACKPLANE), *run, "--backends", "cpu"], capture_output=True, text=True,
                             env={**env(), **env_path}, timeout=300)
    assert without.returncode == 1, without.stdout + without.stderr
    assert ("the package calls acme::fused_gelu on cpu, but no loaded backend implements it for CPU; load the plugin "
            "that implements it: acme") in without.stdout + without.stderr, without.stdout + without.stderr
    with_acme = subprocess.run([str(BACKPLANE), *run, "--backends", "cpu,acme"], capture_output=True, text=True,
                               env={**env(), **env_path}, timeout=300)
    assert with_acme.returncode == 0, with_acme.stdout + with_acme.stderr


def test_a_second_plugin_implements_another_plugins_op():
    """acme_alt implements acme::fused_gelu from acme's fragment (USES_REGISTRY: it ships
    none). Before acme it is refused, naming the missing op; after it, both serve the op and
    the core chooses per op, as for the core's ops."""
    python("acme_alt_after_acme.py", FIXTURES / "alt")
    first = run_python(f"""
import backplane
backplane.load("cpu")
try:
    backplane.load("acme_alt", path={str(FIXTURES / "alt")!r})
    raise SystemExit("loaded before the plugin that defines its op")
except backplane.BackendError as e:
    assert "manifest lists op 'acme::fused_gelu', which the registry does not define" in str(e), e
    assert "load that plugin first" in str(e), e
""")
    assert first.returncode == 0, first.stderr[-3000:]


def test_vendor_ops_get_sharding_rules_when_loaded():
    # Registered with DTensor at load, from the fragment like the core's: fused_gelu is
    # pointwise (gelu is, and is not linear), clamp_ keeps the tensor it writes.
    python("acme_sharding.py")
