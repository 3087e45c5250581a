"""Issue 45, item 13: a selection file naming a plugin that is not loaded (a misspelling such
as cpu_alternative) used to be taken without a word, its calls going to the plugin serving
without the file. Now applying it warns once, naming each such bucket and the plugins
loaded, and strict (load/apply_selection strict=True, the command's --strict) refuses it."""
import textwrap

import pytest

from conftest import run_python
from test_selection_file import PROGRAMS, SPLIT, _cli, _file, FIXTURES


def _child(snippet: str) -> str:
    """Runs a few lines after programs/size_split.py (cpu loaded; ident, small, large,
    served, FIXTURES) in a child; its stdout."""
    program = (PROGRAMS / "size_split.py").read_text() + textwrap.dedent(snippet)
    r = run_python(program, FIXTURES)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout

MISSPELT = SPLIT.replace("plugin: cpu}", "plugin: cpu_alternative}")


def unloaded(path) -> str:
    return (f"{path}: names plugins that are not loaded (loaded: cpu, cpu_alt): op 'identity_conv' on CPU, "
            "bucket 2: 'cpu_alternative'")


WARNING = "backplane: selection file {}; calls of those sizes go to the plugin serving without the file"
STRICT = "{} (strict: every plugin a selection file names must be loaded and serve the op)"


def test_a_misspelt_plugin_is_one_warning_naming_the_bucket_and_the_loaded_plugins(tmp_path):
    path = _file(tmp_path, MISSPELT)
    out = _child(f"""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backplane.load("cpu_alt", path=FIXTURES, selection={str(path)!r})
        print(repr([str(w.message) for w in caught if "selection file" in str(w.message)]))
        assert (served(small), served(large)) == ("cpu_alt", "cpu"), "the bucket falls back, as documented"
    """)
    assert out.strip() == repr([WARNING.format(unloaded(path))])


def test_a_file_naming_loaded_plugins_is_silent_under_strict(tmp_path):
    path = _file(tmp_path, SPLIT)
    _child(f"""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backplane.load("cpu_alt", path=FIXTURES, selection={str(path)!r}, strict=True)
        assert not [w for w in caught if "selection file" in str(w.message)], caught
        assert (served(small), served(large)) == ("cpu_alt", "cpu")
    """)


def test_strict_refuses_it_and_applies_nothing(tmp_path):
    path = _file(tmp_path, MISSPELT)
    out = _child(f"""
        import pytest
        backplane.load("cpu_alt", path=FIXTURES)
        for apply in (lambda: backplane.apply_selection({str(path)!r}, strict=True),
                      lambda: backplane.load("cpu_alt", path=FIXTURES, selection={str(path)!r}, strict=True)):
            with pytest.raises(ValueError) as caught:
                apply()
            print(caught.value)
            assert backplane.selection_file() == ""
    """)
    assert out.splitlines() == [STRICT.format(unloaded(path))] * 2


ARGS = ["ops", "--backends", "cpu,cpu_alt", "--plugin-dir", str(FIXTURES)]


def test_the_command_warns_and_refuses_under_strict(tmp_path):
    path = _file(tmp_path, MISSPELT)
    r = _cli(*ARGS, "--selection", str(path))
    assert r.returncode == 0, r.stderr
    assert WARNING.format(unloaded(path)) in r.stderr
    r = _cli(*ARGS, "--selection", str(path), "--strict")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines()[-1] == "backplane ops: " + STRICT.format(unloaded(path)), r.stderr
    assert _cli(*ARGS, "--selection", str(_file(tmp_path, SPLIT, "good.yaml")), "--strict").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["ops", "--strict"], "backplane ops: --strict checks a --selection file; none was given"),
    (["bench", "--strict", "--selection", "FILE"], "backplane bench: --strict: bench applies --selection in the "
     "programs it runs, which cannot check it; check the file with `backplane ops --backends ... --selection FILE "
     "--strict`"),
])
def test_strict_where_it_cannot_check_is_a_usage_error(tmp_path, args, message):
    args = [str(_file(tmp_path, SPLIT)) if a == "FILE" else a for a in args]
    r = _cli(*args)
    assert r.returncode == 2 and r.stderr.startswith(message + "\n"), r.stderr


def test_a_loaded_plugin_that_does_not_serve_the_op_is_named_too(tmp_path):
    """cpu_alt is loaded but has no mul kernel: its bucket would silently go to cpu."""
    path = _file(tmp_path, SPLIT.replace("op: identity_conv", "op: mul"))
    out = _child(f"""
        import pytest
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backplane.load("cpu_alt", path=FIXTURES, selection={str(path)!r})
        print(repr([str(w.message) for w in caught if "selection file" in str(w.message)]))
        with pytest.raises(ValueError) as refused:
            backplane.apply_selection({str(path)!r}, strict=True)
        print(refused.value)
    """)
    what = (f"{path}: names loaded plugins that serve no kernel for that op there: op 'mul' on CPU, bucket 1: "
            "'cpu_alt'")
    assert out.splitlines() == [repr([WARNING.format(what)]), STRICT.format(what)]
