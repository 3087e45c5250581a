"""A package never runs on another plugin than it was made with without a word (issue 45,
item 2). A package made with the plain torch._inductor.aoti_compile_and_package records
its plugins (the hook `import backplane` installs); a size-split op records its split and
the selection file; a refusal's hint is itself accepted; a package without the record is
refused while two loaded plugins serve one of its ops and nothing chose between them.
`backplane run` (C++) and backplane.load_package (Python) behave the same.

One AOTInductor compile (programs/package_provenance_child.py make), shared by the tests; every
other package is a copy with its record rewritten or removed."""
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from backplane.aoti import packaging_hook
from backplane.aoti.plugins import ENTRY, PluginRecord, backplane_ops, read_record
from conftest import child_env, made_once_per_run, run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
CHILD = Path(__file__).with_name("programs") / "package_provenance_child.py"
SPLIT_REFUSED = ("backplane::identity_conv on CPU was served by plugin 'cpu_alt<=64,cpu' when the package was made; "
                 "here 'cpu' serves it (loaded first; offered by cpu, cpu_alt)")
UNRECORDED = ("the package records no plugins (it was made where Backplane did not record them), and "
              "backplane::identity_conv on CPU is offered here by cpu, cpu_alt: 'cpu' serves it only because it was "
              "loaded first, which need not be the plugin it was made with")


def child(*args):
    return run_python(CHILD, *args, env={"PYTHONPATH": os.pathsep.join([str(REPO / "python"), os.environ.get(
        "PYTHONPATH", "")]), "FIXTURES": str(FIXTURES)}, timeout=600)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The folder holding conv.pt2 (made under split.yaml), split.yaml and io.pt."""
    with made_once_per_run(tmp_path_factory, "provenance") as (folder, done):
        if not done:
            result = child("make", folder)
            assert result.returncode == 0, result.stderr[-3000:]
        return folder


def with_record(made, tmp_path, text):
    """A copy of the package whose record is `text` (None: no record, as one made elsewhere)."""
    path = tmp_path / "copy.pt2"
    with zipfile.ZipFile(made / "conv.pt2") as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            if not item.filename.endswith(ENTRY):
                dst.writestr(item, src.read(item))
        top = src.namelist()[0].split("/")[0]
        if text is not None:
            dst.writestr(f"{top}/{ENTRY}", text)
    return path


def run(package, io, *flags):
    result = subprocess.run([str(BACKPLANE), "run", str(package), "--input", str(io), "--backends", "cpu,cpu_alt",
                             "--plugin-dir", str(FIXTURES), "--repeat", "1", *flags], capture_output=True, text=True,
                            env=child_env(), timeout=300)
    return result.returncode, result.stdout, result.stderr


def test_the_plain_torch_call_records_the_split_and_its_selection_file(made):
    split = made / "split.yaml"
    assert read_record(made / "conv.pt2") == PluginRecord(
        rows=(("identity_conv", "CPU", "cpu_alt<=64,cpu"),),
        selection_digest=hashlib.sha256(split.read_bytes()).hexdigest(), selection_path=str(split))


def test_run_refuses_a_split_package_and_its_hint_runs_it(made):
    code, out, err = run(made / "conv.pt2", made / "io.pt")
    assert code == 1 and SPLIT_REFUSED in err, err
    assert f"apply that file (--selection {made / 'split.yaml'})" in err and "--allow-plugin-change" in err, err
    hint = re.search(r"\(--selection (\S+)\)", err).group(1)
    code, out, err = run(made / "conv.pt2", made / "io.pt", "--selection", hint)
    assert code == 0 and out.count("matches bit for bit") == 2, out + err
    assert "backplane::identity_conv on CPU: served by 'cpu_alt<=64,cpu' (as packaged)" in out
    # What the refusal prevents: run anyway, batch 2 goes to cpu (x), made on cpu_alt (-x).
    code, out, err = run(made / "conv.pt2", made / "io.pt", "--allow-plugin-change")
    assert code == 1 and "batch   2: MISMATCH" in out and "batch  16: matches" in out, out + err


def test_load_package_refuses_a_split_package_and_its_hint_runs_it(made):
    result = child("load", made / "conv.pt2", made / "io.pt")
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout)
    assert SPLIT_REFUSED in outcome["refused"], outcome
    assert f"backplane.apply_selection({str(made / 'split.yaml')!r})" in outcome["refused"], outcome
    assert "allow_plugin_change=True" in outcome["refused"] and "--" not in outcome["refused"], outcome
    assert outcome["hint_ran"] and outcome["matches"] == [True, True], outcome


@pytest.mark.parametrize("record", [
    "# backplane plugins v1: op dispatch_key plugin\nidentity_conv CPU cpu_alt<=64,cpu\n",
    None,
], ids=["v1-without-the-file", "unrecorded"])
def test_without_a_named_file_the_hint_still_runs(made, tmp_path, record):
    """A v1 record (made before the file was recorded) and a package without a record: the
    hint is --selection FILE, and the selection file it was made with runs it."""
    package = with_record(made, tmp_path, record)
    code, out, err = run(package, made / "io.pt")
    assert code == 1 and "--selection FILE" in err and "--allow-plugin-change" in err, err
    assert (UNRECORDED if record is None else "it was split by size by a selection file: apply that file") in err, err
    code, out, err = run(package, made / "io.pt", "--selection", made / "split.yaml")
    assert code == 0 and out.count("matches bit for bit") == 2, out + err


def test_an_unrecorded_package_names_every_plugin_and_each_prefer_is_accepted(made, tmp_path):
    package = with_record(made, tmp_path, None)
    code, out, err = run(package, made / "io.pt")
    assert code == 1 and f"backplane run: {package}: refused" in err and UNRECORDED in err, err
    assert "(--prefer identity_conv:cpu or --prefer identity_conv:cpu_alt)" in err, err
    for plugin in ("cpu", "cpu_alt"):
        code, out, err = run(package, made / "io.pt", "--prefer", f"identity_conv:{plugin}")
        assert "refused" not in err, err
        assert (f"backplane::identity_conv on CPU: served by '{plugin}' (the package records no plugins; preferred "
                "for identity_conv)") in out, out + err


@pytest.mark.slow
def test_load_package_refuses_an_unrecorded_package_unless_told(made, tmp_path):
    package = with_record(made, tmp_path, None)
    result = child("load", package, made / "io.pt")
    outcome = json.loads(result.stdout)
    assert UNRECORDED in outcome["refused"] and str(package) in outcome["refused"], outcome
    assert ("backplane.prefer('identity_conv', 'cpu') or backplane.prefer('identity_conv', 'cpu_alt')"
            in outcome["refused"]), outcome
    result = child("load", package, made / "io.pt", made / "split.yaml")
    outcome = json.loads(result.stdout)
    assert outcome["refused"] is None and outcome["matches"] == [True, True], outcome
    result = child("allow", package, made / "io.pt")
    outcome = json.loads(result.stdout)
    assert outcome["refused"] is None and outcome["matches"] == [False, True], outcome
    assert outcome["notes"] == ["backplane::identity_conv on CPU: served by 'cpu' (the package records no plugins; "
                                "loaded first: allowed)"], outcome


def test_an_unrecorded_package_with_one_plugin_serving_runs(made, tmp_path):
    """Nothing to choose between: cpu alone serves identity_conv (x), so batch 2, made on cpu_alt, mismatches
    but is not refused."""
    package = with_record(made, tmp_path, None)
    result = subprocess.run([str(BACKPLANE), "run", str(package), "--input", str(made / "io.pt"), "--backends", "cpu",
                             "--repeat", "1"], capture_output=True, text=True, env=child_env(), timeout=300)
    assert "refused" not in result.stderr and "batch  16: matches bit for bit" in result.stdout, result.stderr


@pytest.mark.parametrize("line, message", [
    ("@selection_file sha256:abc /x.yaml", r"line 2: expected '@selection_file sha256:HEX \[PATH\]', found"),
    ("identity_conv CPU", r"line 2: expected 'op dispatch_key plugin', found 'identity_conv CPU'"),
])
def test_a_malformed_record_names_the_line_in_both_readers(made, tmp_path, line, message):
    package = with_record(made, tmp_path, f"# backplane plugins v2: op dispatch_key plugin\n{line}\n")
    with pytest.raises(ValueError, match=rf"copy.pt2:\w+/{ENTRY}, {message}"):  # the entry, under the top folder
        read_record(package)
    code, out, err = run(package, made / "io.pt")
    assert code == 1 and re.search(f"copy.pt2:{ENTRY}, {message}", err), err  # torch's reader strips the folder


class AddTwice(torch.nn.Module):
    def forward(self, a, b):
        return torch.ops.backplane.add(a, b, alpha=2.0)


def fake_package(exported_program, package_path):
    """Stands in for torch's compile: an archive shaped like a .pt2."""
    with zipfile.ZipFile(package_path, "w") as z:
        z.writestr("m/archive_format", "pt2")
    return package_path


def test_the_hook_records_a_package_and_leaves_the_result_alone(tmp_path):
    ep = torch.export.export(AddTwice(), (torch.randn(4), torch.randn(4)))
    hooked = packaging_hook.recording(fake_package)
    assert hooked(ep, package_path=str(tmp_path / "m.pt2")) == str(tmp_path / "m.pt2")
    assert read_record(tmp_path / "m.pt2") == PluginRecord(rows=(("add", "CPU", "cpu"),))
    buffer = io.BytesIO()  # torch takes a writable, seekable buffer as package_path too
    assert hooked(ep, package_path=buffer) is buffer
    assert read_record(buffer) == PluginRecord(rows=(("add", "CPU", "cpu"),))
    with pytest.warns(RuntimeWarning, match=r"could not record the plugins serving add in the package '.*not-a-zip'"):
        assert packaging_hook.recording(lambda ep, package_path: package_path)(ep, package_path=str(
            tmp_path / "not-a-zip")) == str(tmp_path / "not-a-zip")
    with pytest.raises(ValueError, match="Only ExportedProgram is supported"):  # torch's own error, untouched
        torch._inductor.aoti_compile_and_package(AddTwice())


@pytest.mark.parametrize("order", ["import backplane; import torch._inductor", "import torch._inductor; import backplane"])
def test_the_hook_is_installed_whichever_comes_first(order):
    code = (f"{order}; import torch; f = torch._inductor.aoti_compile_and_package; "
            "print(getattr(f, '_backplane_records_plugins', False), f.__wrapped__.__module__)")
    result = run_python(code)
    assert result.stdout.split() == ["True", "torch._inductor"], result.stdout + result.stderr[-2000:]


def test_an_op_called_through_a_registry_class_is_recorded_too():
    sys.path.insert(0, str(REPO))
    from models.identity import ClassLayer

    ep = torch.export.export(ClassLayer(4), (torch.randn(2, 4, 3, 3),))
    assert not [n for n in ep.graph.nodes if hasattr(n.target, "_schema")]  # only the class's method calls it
    assert backplane_ops(ep) == ["identity_conv"]
