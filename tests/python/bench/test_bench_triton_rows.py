"""`backplane bench` with a plugin of kind triton (python/backplane/bench/triton_rows.py):
the engine times the library backends, Python the triton plugin's rows after it, in one
table and one JSON. The in-tree plugin runs under Triton's CPU interpreter, in child
processes only: TRITON_INTERPRET is read process-wide, so this process never sets it.
Smallest preset and shortest times: the interpreter takes milliseconds per call."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import backplane.bench as bench

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FAST = ["--ops", "add", "--dtypes", "float32", "--shapes", "4K_elements", "--min-time", "0.01", "--max-time", "0.02",
        "--no-compile"]

pytest.importorskip("triton")
if not (BACKPLANE.parent.parent / "lib" / "libbackplane_triton.manifest.yaml").is_file():
    pytest.skip("the build has no triton plugin (backends/triton)", allow_module_level=True)


def _env(interpret: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "BACKPLANE_BACKENDS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def _bench(*args, interpret=True, timeout=120):
    return subprocess.run([str(BACKPLANE), "bench", *args], env=_env(interpret), capture_output=True, text=True,
                          timeout=timeout)


def _line(stdout: str, backend: str) -> str:
    found = [line for line in stdout.splitlines() if line.split()[3:4] == [backend]]
    assert len(found) == 1, stdout
    return found[0]


def test_triton_rows_beside_the_engines_in_one_table_and_one_json(tmp_path):
    out = tmp_path / "run.json"
    done = _bench("--backends", "cpu,triton", *FAST, "--json", str(out))
    assert done.returncode == 0, done.stderr
    # One table: the engine's columns, a line per backend; x base and GB/s filled for triton too.
    cpu, triton = _line(done.stdout, "cpu"), _line(done.stdout, "triton")
    assert triton.split()[:5] == ["add", "4K_elements", "float32", "triton", "eager"], triton
    assert len(triton.split()) >= len(cpu.split()) - 1 and triton.split()[-1] != "-", done.stdout
    results = bench.load(out)  # the one reader takes it as an engine run
    rows = {r.backend: r for r in bench.rows(results) if r.impl == "backplane"}
    assert set(rows) == {"cpu", "triton"}
    row = rows["triton"]
    assert not row.error and len(row.times_us) == 1 and row.times_us[0] > 0 and row.gbps and row.mode == "eager"
    assert row.plugin.endswith("libbackplane_triton.manifest.yaml")
    context = results["context"]
    assert context["shared_rows.triton"] == "cpu" and context["backend.triton"].endswith("key CPU, device cpu)")
    line = next(t for t in bench.table(results) if t["backend"] == "triton")
    assert line["vs_reference"] and line["pct_copy"], line
    entry = next(e for e in results["benchmarks"] if e["name"].startswith("add/triton/"))
    assert entry["name"] == "add/triton/backplane/4K_elements_float32" and "mode" not in entry
    assert entry["label"] == "float32 backplane::add" and entry["samples"] >= 1


def test_a_wrong_triton_result_is_reported_not_timed(tmp_path):
    # The reference made wrong stands in for a wrong kernel: the check's wiring is what is tested.
    script = ("import sys, backplane.bench as b, backplane.bench.triton_rows as t\n"
              "reference = t._reference\n"
              "t._reference = lambda *a: {k: -v - 1 for k, v in reference(*a).items()}\n"
              "sys.exit(b.main(sys.argv[1:]))\n")
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, "-c", script, "--backends", "cpu,triton", *FAST, "--json", str(out)],
                          env=_env(True), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "add/triton/backplane/4K_elements_float32: wrong result against the reference" in done.stderr
    row = next(r for r in bench.rows(bench.load(out)) if r.backend == "triton")
    assert row.error.startswith("wrong result against the reference") and not row.times_us


def test_triton_alone_is_refused_naming_a_library_backend():
    done = _bench("--backends", "triton", *FAST, timeout=60)
    assert done.returncode == 2
    assert "name one beside them (--backends cuda,triton; cpu,triton under TRITON_INTERPRET=1)" in done.stderr


def test_a_triton_plugin_that_cannot_load_is_skipped_with_its_reason():
    # No CUDA and no interpreter: the plugin is unavailable; the library backend's rows stay.
    if __import__("torch").cuda.is_available():
        pytest.skip("the triton plugin loads on this machine's GPU")
    done = _bench("--backends", "cpu,triton", *FAST, interpret=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "skipping backend 'triton'" in done.stderr and "no CUDA device" in done.stderr
    _line(done.stdout, "cpu")
    assert not [line for line in done.stdout.splitlines() if line.split()[3:4] == ["triton"]]
