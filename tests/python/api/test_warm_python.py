"""run_python's warm server (tests/python/warm_python.py): a program forked from it must
finish as the same program in a new interpreter does: output, exit status, a signal's
death, argv, sys.path[0], working directory, environment, `__main__`. Each case runs both
ways and compares."""
import subprocess
import textwrap

import pytest

import warm_python
from conftest import run_python

PROBE = textwrap.dedent("""\
    import json, os, sys
    import __main__
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                      "file": getattr(__main__, "__file__", None), "main_is_here": __main__.__dict__ is globals(),
                      "env": os.environ.get("WARM_PROBE"),
                      "inductor": "torch._inductor" in sys.modules}))
    print("to stderr", file=sys.stderr)
""")


def both_ways(monkeypatch, program, *args, **kwargs):
    """(forked, fresh): the program's CompletedProcess from the server, then from a new
    interpreter; asserts the first did come from the server."""
    log = []
    monkeypatch.setattr(warm_python, "_said", lambda what, done=None: log.append(what) or done)
    forked = run_python(program, *args, **kwargs)
    assert log == ["forked"], log
    monkeypatch.setenv("BACKPLANE_FRESH_PYTHON", "1")
    fresh = run_python(program, *args, **kwargs)
    monkeypatch.delenv("BACKPLANE_FRESH_PYTHON")
    return forked, fresh


def same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess):
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_a_program_file_sees_what_a_new_interpreter_gives_it(monkeypatch, tmp_path):
    program = tmp_path / "probe.py"
    program.write_text(PROBE)
    forked, fresh = both_ways(monkeypatch, program, "a", 3, env={"WARM_PROBE": "x"}, cwd=tmp_path / ".")
    same(forked, fresh)
    assert forked.returncode == 0 and '"file": "%s"' % program in forked.stdout, forked.stdout


def test_program_text_sees_what_python_c_gives_it(monkeypatch):
    forked, fresh = both_ways(monkeypatch, PROBE, "b")
    same(forked, fresh)
    assert '"argv": ["-c", "b"]' in forked.stdout and '"file": null' in forked.stdout, forked.stdout


@pytest.mark.parametrize("ending, status", [
    ("sys.exit(3)", 3),
    ("raise ValueError('named')", 1),
    ("os.kill(os.getpid(), signal.SIGKILL)", -9),
    ("os.abort()", -6),
])
def test_exit_status_and_a_signals_death_come_back(monkeypatch, ending, status):
    program = f"import os, signal, sys\nprint('before', flush=True)\n{ending}\n"
    forked, fresh = both_ways(monkeypatch, program)
    assert forked.returncode == fresh.returncode == status
    assert forked.stdout == fresh.stdout == "before\n"
    if status == 1:  # the traceback's last line, as a new interpreter prints it
        assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "ValueError: named"


def test_atexit_runs_and_buffered_output_is_kept(monkeypatch):
    program = "import atexit, sys\natexit.register(print, 'at exit')\nsys.stdout.write('unflushed')\n"
    forked, fresh = both_ways(monkeypatch, program)
    same(forked, fresh)
    assert forked.stdout == "unflushedat exit\n"


def test_a_program_past_its_timeout_is_killed_and_raises(monkeypatch):
    monkeypatch.setattr(warm_python, "_said", lambda what, done=None: done)
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        run_python("import time; print('started', flush=True); time.sleep(60)", timeout=3)
    assert raised.value.output == "started\n"
    assert run_python("print('next')").stdout == "next\n"  # the server goes on


def test_a_variable_torchs_import_reads_takes_a_new_interpreter(monkeypatch):
    log = []
    monkeypatch.setattr(warm_python, "_said", lambda what, done=None: log.append(what) or done)
    done = run_python("import os; print(os.environ['OMP_NUM_THREADS'])", env={"OMP_NUM_THREADS": "7"})
    assert done.stdout == "7\n" and log == ["fresh: OMP_NUM_THREADS differ"], log
    log.clear()
    run_python("pass", flags=("-W", "ignore"))
    assert log == ["fresh: flags, preexec_fn or BACKPLANE_FRESH_PYTHON"], log


def test_programs_started_together_run_together(monkeypatch, tmp_path):
    """Two threads' programs that wait for each other (two ranks of one job): the second
    takes a new interpreter rather than waiting for the server, which is running the first."""
    from concurrent.futures import ThreadPoolExecutor

    log = []
    monkeypatch.setattr(warm_python, "_said", lambda what, done=None: log.append(what) or done)
    program = ("import os, sys, time\nopen(sys.argv[1] + sys.argv[2], 'w').close()\n"
               "while not os.path.exists(sys.argv[1] + sys.argv[3]): time.sleep(0.01)\nprint('met')")
    base = str(tmp_path / "rank")
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda r: run_python(program, base, r, 1 - r, timeout=60), (0, 1)))
    assert [d.stdout for d in done] == ["met\n", "met\n"], done
    assert sorted(log) == ["forked", "fresh: the server is running another thread's program"], log


def test_quick_programs_come_back_without_waiting_for_their_timeout(monkeypatch):
    """A program that ends at once sends its pid and status in one read: both must be
    taken from the buffer (select() on the pipe does not see a buffered line)."""
    monkeypatch.setattr(warm_python, "_said", lambda what, done=None: done)
    for status in range(5):
        assert run_python(f"raise SystemExit({status})", timeout=30).returncode == status
