"""A process using npu ends cleanly with work still queued: held streams, busy workers,
and PyTorch's autograd threads right after a backward. Each case runs in a process of its
own."""

from pathlib import Path

from conftest import run_python
from npu_common import QUIET_FALLBACK, run_alone

PROGRAMS = Path(__file__).with_name("programs")

pytestmark = QUIET_FALLBACK


def test_exit_with_queued_work_and_a_held_stream_is_clean():
    # Work still queued at exit runs before Python finalizes (a worker dropping the
    # last reference to a tensor after that was killed mid-task: abort), and a held
    # stream is released rather than hanging the exit.
    code = ("import torch, backplane; backplane.load('npu'); x = torch.randn(4_000_000, device='npu')\n"
            "for _ in range(20): torch.ops.backplane.scale_(x, 1.0001); "
            "y = torch.ops.backplane.rms_norm(x.view(1000, -1), torch.ones(4000, device='npu'), 1e-6)\n"
            "h = torch.npu._hold_stream(1); torch.ops.backplane.scale_(torch.ones(3, device='npu:1'), 2.0)")
    done = run_python(code, flags=("-W", "ignore"), timeout=120)
    assert done.returncode == 0, done.stderr


def test_exit_with_streams_events_and_busy_workers_is_clean():
    # Every stream of both devices has a worker with work queued when Python exits;
    # the process must end by itself, promptly and with status 0.
    done = run_alone(PROGRAMS / "exit_with_busy_streams.py", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "queued 12"


def test_exit_right_after_a_backward_is_clean():
    # PyTorch's autograd thread for the npu device drops a finished graph task just
    # after waking the caller; a process ending then aborted ("terminate called without
    # an active exception") when that drop was the last reference to a tensor Python
    # knew. Without the plugin's exit-time drain this aborted in about 1 run in 6 here
    # (and 2 of 3 runs of python -m backplane.bench.host_cost --device npu): several runs, each must be
    # clean. A race, so a regression shows up as a failure most runs, not every run.
    code = """
def main():
    a = torch.randn(4, device="npu", requires_grad=True)
    b = torch.randn(4, device="npu", requires_grad=True)
    grad = torch.ones_like(a)
    for _ in range(300):
        torch.autograd.grad(torch.add(a, b), (a, b), grad)
main()
"""
    for run in range(6):
        done = run_alone(code, timeout=60)
        assert done.returncode == 0, f"run {run}: exit status {done.returncode}\n{done.stderr[-2000:]}"


def test_exit_drain_starts_no_autograd_threads():
    # The exit-time drain runs a backward only where PyTorch's autograd device threads
    # exist already: threads it started would each take the GIL while Python finalizes,
    # and abort the process. After a backward, it drains every npu index's thread, with
    # gradients turned off or not.
    done = run_alone(PROGRAMS / "exit_drain_threads.py", timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "without a backward: []", done.stdout
    assert lines[1] == "after a backward: 2 drained", done.stdout
