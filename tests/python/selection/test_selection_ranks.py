"""Issue 45, item 4: in a distributed job every rank compares its selection file with the
others' before applying it (python/backplane/rank_exchange.py). A rank used to wait for
ranks that never compare until the group's timeout (30 minutes); now it waits
BACKPLANE_SELECTION_TIMEOUT seconds, then raises naming them, and a rank coming after that
raises too. The ranks are selection_ranks.py: two gloo processes on the CPU."""
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from backplane import rank_exchange
from conftest import child_env
from test_selection_file import REPO, SPLIT, _file

def two_ranks(tmp_path, mode, first, second, **env) -> list[str]:
    """The stdout of each rank of selection_ranks.py (MODE both or first), by rank."""
    env = child_env(PYTHONPATH=f"{REPO / 'python'}:{REPO}", BACKPLANE_BACKENDS="cpu", NCCL_NVLS_ENABLE="0",
                    TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1", **env)
    script, store = Path(__file__).with_name("selection_ranks.py"), tmp_path / "store"
    if mode == "leaves":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            store = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    ranks = [subprocess.Popen([sys.executable, str(script), str(r), str(store), mode, str(first), str(second)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for r in (0, 1)]
    try:
        outs = [p.communicate(timeout=300) for p in ranks]
    finally:  # a rank still waiting (a hang this test is for) must not outlive it
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in ranks), [o[1][-2000:] for o in outs]
    return [out for out, _ in outs]


@pytest.mark.skipif(sys.platform != "linux", reason="two gloo processes: Linux only here")
@pytest.mark.parametrize("same", [True, False])
def test_every_rank_of_a_job_applies_the_same_file(tmp_path, same):
    first = _file(tmp_path, SPLIT, "first.yaml")
    second = _file(tmp_path, SPLIT if same else SPLIT.replace("up_to: 100", "up_to: 200"), "second.yaml")
    outs = two_ranks(tmp_path, "both", first, second)
    if same:
        assert [out.split()[0] for out in outs] == ["applied", "applied"], outs
    else:
        for out in outs:
            assert out.startswith("refused"), out
            assert "the ranks of this job read different files (ranks [0]: " in out and "ranks [1]: " in out


@pytest.mark.skipif(sys.platform != "linux", reason="two gloo processes: Linux only here")
def test_rank_0_exiting_at_once_leaves_no_rank_reading_a_closed_store(tmp_path):
    """Rank 0 hosts the TCP store; it comes last, so rank 1 is between polls when rank 0 has
    its answer. Rank 0 used to return and exit there, and rank 1 failed with "Failed to recv"
    (seen in `backplane tune` on two ranks); now rank 0 waits until rank 1 has read."""
    first, second = _file(tmp_path, SPLIT, "first.yaml"), _file(tmp_path, SPLIT, "second.yaml")
    outs = two_ranks(tmp_path, "leaves", first, second)
    assert outs == [f"applied {first}\n", f"applied {second}\n"]


@pytest.mark.skipif(sys.platform != "linux", reason="two gloo processes: Linux only here")
def test_a_rank_that_compares_alone_gives_up_naming_the_others(tmp_path):
    first, second = _file(tmp_path, SPLIT, "first.yaml"), _file(tmp_path, SPLIT, "second.yaml")
    outs = two_ranks(tmp_path, "first", first, second, BACKPLANE_SELECTION_TIMEOUT="1")
    assert outs == [
        f"refused selection file {first}: ranks [1] did not compare selection files within 1 s "
        "(BACKPLANE_SELECTION_TIMEOUT, default 60); every rank must do it at the same point, or the ranks that do "
        "wait for the others\n",
        f"refused selection file {second}: rank 0 waited 1 s (BACKPLANE_SELECTION_TIMEOUT) for rank 1 to compare "
        "selection files, and gave up; every rank must do it at the same point\n",
    ]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_timeout_is_refused_naming_it(monkeypatch, value):
    monkeypatch.setenv("BACKPLANE_SELECTION_TIMEOUT", value)
    with pytest.raises(ValueError) as caught:
        rank_exchange.timeout_s()
    assert str(caught.value) == f"BACKPLANE_SELECTION_TIMEOUT={value!r}: expected seconds, a number above 0"


def test_the_timeout_defaults_to_a_minute_and_takes_fractions(monkeypatch):
    monkeypatch.delenv("BACKPLANE_SELECTION_TIMEOUT", raising=False)
    assert rank_exchange.timeout_s() == 60
    monkeypatch.setenv("BACKPLANE_SELECTION_TIMEOUT", "0.5")
    assert rank_exchange.timeout_s() == 0.5
