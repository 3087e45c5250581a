"""How Python gives a group the npu's c10d backend (backends/npu/collectives/c_api.cpp):
two C functions, no operator, the group found by a name in c10d's group registry that
backplane_npu/_collectives.py holds for the call alone. Backplane's own test: a scaffold's
copies of test_collectives.py and test_distributed.py go through the same functions."""
import ctypes
import datetime
import itertools

import pytest
import torch
import torch.distributed as dist

from npu_common import QUIET_FALLBACK

from backplane_npu import _collectives  # the plugin's package: on the path once npu_common loaded it

pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="this torch has no torch.distributed"),
              QUIET_FALLBACK]
c10d = torch._C._distributed_c10d


def _group(cpu_backend=True, npu_backend=False):
    """A group of one process made by hand, as _create makes one, with gloo where asked."""
    store = dist.HashStore()
    group = dist.ProcessGroup(store, 0, 1)
    gloo = dist.ProcessGroupGloo(store, 0, 1, datetime.timedelta(seconds=30))
    if cpu_backend:
        group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    if npu_backend:
        group._register_backend(torch.device("npu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    return group


def _resolvable(name: str) -> bool:
    try:
        c10d._resolve_process_group(name)
        return True
    except RuntimeError:
        return False


def test_no_operator_carries_the_collectives():
    names = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("backplane_npu_collectives::")]
    assert names == []


def test_an_attached_group_runs_on_the_device_and_names_its_backend():
    group = _group()
    _collectives._attach(group, "custom_name", False)
    assert group._get_backend(torch.device("npu")).name() == "custom_name"
    assert group._get_backend(torch.device("cpu")).name() == "custom_name"  # CPU tensors take it too
    assert _collectives.comm_stream(group) is None  # no collective yet: no stream bound
    x = torch.full((4,), 3.0, device="npu")
    group.allreduce([x]).wait()
    stream = _collectives.comm_stream(group)
    assert stream.device == torch.device("npu", 0) and stream != torch.npu.current_stream()
    torch.testing.assert_close(x.cpu(), torch.full((4,), 3.0), rtol=0, atol=0)


def test_the_registry_name_is_held_for_the_call_alone(monkeypatch):
    monkeypatch.setattr(_collectives, "_names", itertools.count(1000))
    attached, refused = _group(), _group(cpu_backend=False)  # alive: c10d's registry forgets a group gone
    _collectives._attach(attached, "npu_gloo", False)
    with pytest.raises(RuntimeError, match=r"expected a group with a backend for CPU tensors"):
        _collectives._attach(refused, "npu_gloo", False)
    assert not _resolvable("backplane_npu_collectives/1000")  # the successful call's name
    assert not _resolvable("backplane_npu_collectives/1001")  # and the failed one's


def test_refusals_name_what_was_expected():
    with pytest.raises(RuntimeError, match=r"^backplane npu: attach expected a group with a backend for CPU tensors "
                                           r"\(gloo\) to run the collectives on; the group has none$"):
        _collectives._attach(_group(cpu_backend=False), "npu_gloo", False)
    with pytest.raises(RuntimeError, match=r"^backplane npu: comm_stream expected a group with an npu backend; the "
                                           r"group has none$"):
        _collectives.comm_stream(_group())
    with pytest.raises(RuntimeError, match=r"^backplane npu: comm_stream expected the group's npu backend to be this "
                                           r"plugin's; got gloo$"):
        _collectives.comm_stream(_group(npu_backend=True))


def test_a_name_the_registry_lacks_is_refused():
    bound, device, stream_id = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int64(0)
    for fn, args in [(_collectives._ATTACH, (b"npu_gloo", 0)),
                     (_collectives._COMM_STREAM, (ctypes.byref(bound), ctypes.byref(device), ctypes.byref(stream_id)))]:
        with pytest.raises(RuntimeError, match=rf"^backplane npu: {fn.split('_collectives_')[1]} expected a process "
                                               r"group registered under the name 'nowhere' in c10d's group registry; "
                                               r"found none$"):
            _collectives._call(fn, b"nowhere", *args)
