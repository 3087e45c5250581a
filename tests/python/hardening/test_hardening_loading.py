"""Plugins opened without being named in code (BACKPLANE_BACKENDS at import; the autoload
is in test_npu_autoload.py) are probed in a child process first, with the probe cached by
the files' identity; and a FIFO or device where a manifest, a registry fragment or a
plugin should be is refused, never read (a read would block `backplane list` and every
import for good)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import child_env, run_python
from fault_plugins import hanging_plugin, plugin_copy

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))


def python(code: str, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    return run_python(code, env={"XDG_CACHE_HOME": str(tmp_path / "cache"), **env}, unset=("BACKPLANE_PLUGIN_PATH",))


LOADED = "import backplane; print(sorted(b.name for b in backplane.backends() if b.status == 'loaded'))"


def left_out(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "were left out of this process" in line]


def test_backends_variable_probes_first_and_the_import_goes_on(tmp_path):
    """BACKPLANE_BACKENDS naming plugins whose initializer calls exit(0), aborts or throws:
    `import backplane` used to end with rc 0 and no output, die with 134, or fail; now it
    loads the others and one warning names each failure with its reason."""
    faults = tmp_path / "faults"
    for fault in ("exits", "aborts", "throws"):
        plugin_copy(faults, fault)
    done = python(LOADED, tmp_path, BACKPLANE_BACKENDS="cpu,init_exits,init_aborts,init_throws",
                  BACKPLANE_PLUGIN_PATH=str(faults), BACKPLANE_FIXTURE_FAULT="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['cpu']"
    (warning,) = left_out(done.stderr)
    assert "backplane: 3 plugin(s) failed and were left out of this process: " in warning
    assert (f"init_exits ({faults / 'libbackplane_init_exits.so'}): ended the process while opening (exit status 0), "
            "in a child process probe; not opened here" in warning)
    assert "init_aborts (" in warning and "crashed while opening, with signal 6 (Aborted), in a child process probe" in warning
    assert ("its static initializer threw while opening: init_throws: a static initializer that throws" in warning
            and "(in a child process probe; not opened here)" in warning)


def test_a_plugin_that_hangs_while_opening_is_killed_and_left_out(tmp_path):
    hanging_plugin(tmp_path / "hang")
    done = python(LOADED, tmp_path, BACKPLANE_BACKENDS="cpu,init_hangs", BACKPLANE_PLUGIN_PATH=str(tmp_path / "hang"),
                  BACKPLANE_PROBE_TIMEOUT="3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['cpu']"
    (warning,) = left_out(done.stderr)
    assert "init_hangs (" in warning
    assert "did not finish opening within 3 s in a child process probe (killed); not opened here" in warning


def test_python_reads_the_commands_verdict(tmp_path):
    """`backplane __probe_in_child` owns the probe, its timeout and its wording; Python reads
    its one line (backplane_plugins._VERDICT_*)."""
    plugin = plugin_copy(tmp_path / "faults", "aborts")
    env = child_env(BACKPLANE_PLUGIN_PATH=str(plugin.parent), BACKPLANE_FIXTURE_FAULT="1")

    def verdict(name):
        return subprocess.run([str(BACKPLANE), "__probe_in_child", name, ""], capture_output=True, text=True,
                              env=env, timeout=120)

    failed, passed = verdict("init_aborts"), verdict("cpu")
    assert failed.returncode == 0 and failed.stdout == (
        "backplane-probe: failed: crashed while opening, with signal 6 (Aborted), in a child process probe; "
        "not opened here\n")
    assert passed.returncode == 0 and passed.stdout == "backplane-probe: passed\n"


def test_the_probe_is_cached_by_the_files_identity(tmp_path):
    """The second import reads the first one's probe (a planted reason shows it was not run
    again); touching the plugin file probes it again."""
    plugin = plugin_copy(tmp_path / "faults", "aborts")
    env = dict(BACKPLANE_BACKENDS="init_aborts", BACKPLANE_PLUGIN_PATH=str(plugin.parent), BACKPLANE_FIXTURE_FAULT="1")
    assert "signal 6 (Aborted)" in left_out(python(LOADED, tmp_path, **env).stderr)[0]
    cache_file = tmp_path / "cache" / "backplane" / "plugin-probes.json"
    cache = json.loads(cache_file.read_text())
    cache[str(plugin)]["failure"] = "the planted reason"
    cache_file.write_text(json.dumps(cache))
    (warning,) = left_out(python(LOADED, tmp_path, **env).stderr)
    assert "init_aborts (" in warning and "the planted reason" in warning
    os.utime(plugin, ns=(plugin.stat().st_atime_ns, plugin.stat().st_mtime_ns + 1_000_000_000))
    (warning,) = left_out(python(LOADED, tmp_path, **env).stderr)
    assert "the planted reason" not in warning and "signal 6 (Aborted)" in warning


def test_a_plugin_that_passes_the_probe_loads_and_is_cached_as_passing(tmp_path):
    plugin = plugin_copy(tmp_path / "quiet", "exits")  # without BACKPLANE_FIXTURE_FAULT: an ordinary plugin
    done = python(LOADED, tmp_path, BACKPLANE_BACKENDS="cpu,init_exits", BACKPLANE_PLUGIN_PATH=str(plugin.parent))
    assert done.returncode == 0 and not left_out(done.stderr), done.stderr[-3000:]
    assert done.stdout.strip() == "['cpu', 'init_exits']"
    cache = json.loads((tmp_path / "cache" / "backplane" / "plugin-probes.json").read_text())
    assert cache[str(plugin)]["failure"] is None


def fifo_plugin(folder: Path, where: str) -> str:
    """A plugin `fifo` in `folder` whose manifest, registry fragment or library is a FIFO."""
    plugin_copy(folder, "exits", "fifo")
    manifest = folder / "libbackplane_fifo.manifest.yaml"
    if where == "registry":
        manifest.write_text(manifest.read_text() + "registry: fifo_ops.yaml\n")
        os.mkfifo(folder / "fifo_ops.yaml")
        return (f"its registry fragment {folder / 'fifo_ops.yaml'} cannot be read: it is a FIFO (named pipe), "
                "expected a regular file")
    if where == "manifest":
        manifest.unlink()
        os.mkfifo(manifest)
        return f"cannot read manifest {manifest}: it is a FIFO (named pipe), expected a regular file"
    (folder / "libbackplane_fifo.so").unlink()
    os.mkfifo(folder / "libbackplane_fifo.so")
    return "the plugin file cannot be opened: it is a FIFO (named pipe), expected a regular file"


@pytest.mark.parametrize("where", ["manifest", "registry", "library"])
def test_list_refuses_a_fifo_instead_of_blocking_on_it(tmp_path, where):
    reason = fifo_plugin(tmp_path, where)
    r = subprocess.run([str(BACKPLANE), "list", "--json", "--plugin-path", str(tmp_path)], capture_output=True,
                       text=True, env=child_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    found = {b["name"]: b for b in json.loads(r.stdout)["backends"]}
    assert found["fifo"]["status"] == "rejected" and found["fifo"]["reason"] == reason, found["fifo"]
    assert found["cpu"]["status"] == "loaded"


def test_a_character_device_as_manifest_is_refused(tmp_path):
    plugin_copy(tmp_path, "exits", "dev")
    (tmp_path / "libbackplane_dev.manifest.yaml").unlink()
    (tmp_path / "libbackplane_dev.manifest.yaml").symlink_to("/dev/zero")  # endless if read
    done = python("import backplane; print([b.reason for b in backplane.backends() if b.name == 'dev'][0])",
                  tmp_path, BACKPLANE_PLUGIN_PATH=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == (f"cannot read manifest {tmp_path / 'libbackplane_dev.manifest.yaml'}: "
                                   "it is a character device, expected a regular file")


def test_the_autoload_refuses_a_fifo_manifest(tmp_path):
    """backplane._autoload, what the torch.backends entry point runs, lists the plugin as
    rejected and loads the others."""
    fifo_plugin(tmp_path, "manifest")
    code = ("import backplane; backplane._autoload(); "
            "print({b.name: b.status for b in backplane.backends()}['fifo'], "
            "{b.name: b.status for b in backplane.backends()}['cpu'])")
    done = python(code, tmp_path, BACKPLANE_PLUGIN_PATH=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["rejected", "loaded"]


def test_a_fifo_as_the_probe_cache_is_not_read(tmp_path):
    (tmp_path / "cache" / "backplane").mkdir(parents=True)
    os.mkfifo(tmp_path / "cache" / "backplane" / "plugin-probes.json")
    plugin = plugin_copy(tmp_path / "quiet", "exits")
    done = python(LOADED, tmp_path, BACKPLANE_BACKENDS="init_exits", BACKPLANE_PLUGIN_PATH=str(plugin.parent))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['init_exits']"


def test_list_kills_a_probe_after_the_probe_timeout(tmp_path):
    hanging_plugin(tmp_path / "hang")
    r = subprocess.run([str(BACKPLANE), "list", "--json", "--plugin-path", str(tmp_path / "hang")], capture_output=True,
                       text=True, env=child_env(BACKPLANE_PROBE_TIMEOUT="10"), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    found = {b["name"]: b for b in json.loads(r.stdout)["backends"]}
    assert found["init_hangs"]["status"] == "failed"
    assert found["init_hangs"]["reason"] == ("did not finish opening within 10 s in a child process probe (killed); "
                                             "not opened here")
