"""backplane.fast_call: torch.ops.backplane.<op> called through the _fast_call extension.
Whatever the fast path takes must give exactly what torch.ops' own path gives (results,
gradients, errors); whatever it cannot convert must reach torch's path, __torch_function__
included; the objects must stay the OpOverloadPacket/OpOverload torch.compile sees."""
import os
import threading
from pathlib import Path

import pytest
import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import backplane
from backplane import fast_call

from conftest import run_python
from samples import op_names, require_kernel, results, twin_call

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(fast_call.status() != "on", reason=f"fast call {fast_call.status()}")


def _op(name):
    return next(o for o in backplane.ops() if o.name == name)


def test_packets_and_overloads_keep_their_identity_and_type():
    packet = torch.ops.backplane.add
    assert isinstance(packet, OpOverloadPacket) and isinstance(packet.default, OpOverload)
    assert type(packet) is not OpOverloadPacket, "the fast call is installed on the packet"
    assert type(packet.default) is not OpOverload, "and on its overload"
    assert torch.ops.backplane.add is packet and packet.default is torch.ops.backplane.add.default
    assert backplane.info()["fast_call"] == "on"


@pytest.mark.parametrize("name", op_names())
def test_fast_path_gives_what_torch_ops_gives(name):
    require_kernel(name, "cpu")
    packet = backplane.torch_op(name)
    args, kwargs = backplane.sample_call(_op(name))
    fast_args, fast_kwargs = twin_call(args, kwargs)
    slow_args, slow_kwargs = twin_call(args, kwargs)
    fast = results(packet, packet(*fast_args, **fast_kwargs), fast_args, fast_kwargs)
    slow = results(packet, packet._op(*slow_args, **slow_kwargs), slow_args, slow_kwargs)  # torch's own path
    over = results(packet, packet.default(*args, **kwargs), args, kwargs)
    assert len(fast) == len(slow) == len(over)
    for f, s, o in zip(fast, slow, over):
        assert torch.equal(f, s) and torch.equal(o, s)


def test_keywords_defaults_and_python_numbers():
    a, b = torch.randn(5), torch.randn(5)
    add = torch.ops.backplane.add
    expected = add._op(a, b, alpha=2)
    assert torch.equal(add(a, b, alpha=2), expected)
    assert torch.equal(add(a=a, b=b, alpha=2.0), add._op(a, b, alpha=2.0))
    assert torch.equal(add(b=b, a=a), add._op(a, b))
    for call in (add, add._op):  # a bool alpha is refused alike (ATen refuses it too)
        with pytest.raises(TypeError, match="backplane::add: argument 'alpha' is a bool"):
            call(a, b, alpha=True)
    x, w = torch.randn(3, 8), torch.randn(8)
    assert torch.equal(torch.ops.backplane.rms_norm(x, w, 1), torch.ops.backplane.rms_norm._op(x, w, 1))
    img = torch.randn(1, 3, 8, 8)
    assert torch.equal(torch.ops.backplane.crop(img, (1, 2, 3, 4)), torch.ops.backplane.crop._op(img, [1, 2, 3, 4]))


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type is what the test compares)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("call", [
    pytest.param(lambda op: op(torch.randn(3), torch.randn(4)), id="shapes that do not broadcast"),
    pytest.param(lambda op: op(torch.randn(3), torch.randn(3, dtype=torch.float64)), id="mixed dtypes"),
    pytest.param(lambda op: op(torch.randn(3, dtype=torch.int32), torch.randn(3).int()), id="unsupported dtype"),
    pytest.param(lambda op: op(torch.randn(3)), id="missing argument"),
    pytest.param(lambda op: op(torch.randn(3), torch.randn(3), 2), id="keyword-only given by position"),
    pytest.param(lambda op: op(torch.randn(3), torch.randn(3), beta=2), id="unknown keyword"),
    pytest.param(lambda op: op(torch.randn(3), None), id="None for a Tensor"),
    pytest.param(lambda op: op(torch.randn(3), 2.0), id="a number for a Tensor"),
    pytest.param(lambda op: op(torch.randn(3), torch.randn(3), alpha="x"), id="a str for a Scalar"),
    pytest.param(lambda op: op(torch.randn(3), torch.randn(3), alpha=2**70), id="an int beyond int64"),
])
def test_errors_are_torch_own(call):
    """The fast path raises exactly what torch.ops' path raises (or hands the call to it)."""
    add = torch.ops.backplane.add
    fast, slow = _error(lambda: call(add)), _error(lambda: call(add._op))
    assert fast is not None and fast == slow


def test_crop_box_of_the_wrong_length_is_torch_own_error():
    img = torch.randn(1, 3, 8, 8)
    crop = torch.ops.backplane.crop
    for box in ([1, 2, 3], (1, 2, 3, 4, 5), [1, 2, 3, 4.0], 3):
        assert _error(lambda: crop(img, box)) == _error(lambda: crop._op(img, box)), box


def test_gradients_flow_through_the_fast_path():
    a = torch.randn(4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    torch.ops.backplane.add(a, b, alpha=3.0).sum().backward()
    assert torch.equal(a.grad, torch.ones(4)) and torch.equal(b.grad, torch.full((4,), 3.0))
    w = torch.nn.Parameter(torch.ones(4))  # a subclass that disables __torch_function__: fast path
    y = torch.ops.backplane.mul(w, torch.full((4,), 2.0))
    y.sum().backward()
    assert torch.equal(w.grad, torch.full((4,), 2.0))


def test_in_place_op_writes_and_bumps_the_version():
    x = torch.ones(4)
    version = x._version
    assert torch.ops.backplane.scale_(x, 2.5) is None
    assert torch.equal(x, torch.full((4,), 2.5)) and x._version > version


class Logged(torch.Tensor):
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(str(func))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_torch_function_subclass_is_handed_to_torch():
    Logged.calls.clear()
    a = torch.randn(3).as_subclass(Logged)
    out = torch.ops.backplane.add(a, torch.randn(3))
    assert any("backplane.add" in c for c in Logged.calls), Logged.calls
    assert isinstance(out, Logged)


def test_a_torch_function_mode_sees_the_call():
    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Mode():
        torch.ops.backplane.add(torch.randn(3), torch.randn(3))
        torch.ops.backplane.add.default(torch.randn(3), torch.randn(3))
    assert sum("backplane.add" in s for s in seen) == 2, seen


def test_a_dispatch_mode_that_calls_another_op_inside():
    """A call made from inside a kernel's dispatch (here a TorchDispatchMode) while the
    outer call is running: the nested call must not reuse the outer call's argument stack."""
    class Doubling(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.backplane.add.default:
                out = torch.ops.backplane.mul(out, torch.full_like(out, 2.0))
            return out

    a, b = torch.randn(6), torch.randn(6)
    with Doubling():
        got = torch.ops.backplane.add(a, b)
    assert torch.equal(got, (a + b) * 2)


def test_threads_calling_at_once():
    a = torch.randn(64)
    expected = torch.ops.backplane.add._op(a, a, alpha=2)
    failures = []

    def work():
        for _ in range(2000):
            if not torch.equal(torch.ops.backplane.add(a, a, alpha=2), expected):
                failures.append("wrong")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_torch_compile_fullgraph_sees_the_op():
    def f(a, b):
        return torch.ops.backplane.add(a, b) * 2

    gm_ops = []

    def backend(gm, example_inputs):
        gm_ops.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    a, b = torch.randn(4), torch.randn(4)
    got = torch.compile(f, backend=backend, fullgraph=True)(a, b)
    assert torch.equal(got, (a + b) * 2)
    assert any("backplane.add" in t for t in gm_ops), gm_ops


def test_off_switch_leaves_torch_objects_alone():
    code = ("import torch, backplane; from torch._ops import OpOverloadPacket; "
            "print(backplane.info()['fast_call']); print(type(torch.ops.backplane.add) is OpOverloadPacket)")
    done = run_python(code, env={"BACKPLANE_FAST_CALL": "0", "PYTHONPATH": os.pathsep.join(
        [str(REPO / "python"), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.split() == ["off:", "BACKPLANE_FAST_CALL=0", "True"]


def test_jit_trace_records_the_op():
    a, b = torch.randn(3), torch.randn(3)
    traced = torch.jit.trace(lambda x, y: torch.ops.backplane.add(x, y, alpha=2.0), (a, b))
    assert "backplane::add" in str(traced.graph)
    assert torch.equal(traced(a, b), a + 2 * b)


def test_an_object_posing_as_a_tensor_goes_to_torch():
    """A mock with spec=torch.Tensor passes isinstance(); it must never be read as a tensor
    (it was, and crashed): torch's path hands it to its __torch_function__."""
    from unittest import mock

    m = mock.MagicMock(spec=torch.Tensor)
    a = torch.randn(3)
    add = torch.ops.backplane.add
    assert type(add(m, a)) is type(add._op(m, a))


def test_inspect_signature_is_the_one_torch_gives():
    """As for an untouched torch packet and overload (aten's)."""
    import inspect

    assert inspect.signature(torch.ops.backplane.add) == inspect.signature(torch.ops.aten.add)
    assert inspect.signature(torch.ops.backplane.add.default) == inspect.signature(torch.ops.aten.add.Tensor)


def test_a_packet_with_several_overloads_keeps_torch_choice():
    """torch picks a packet's overload from the arguments; the fast call knows one schema,
    so a packet with several keeps torch's path (its overloads may still be fast)."""
    lib = torch.library.Library("bp_fast_call_test", "DEF")
    try:
        lib.define("f.int(Tensor x, int n) -> Tensor")
        lib.define("f(Tensor x, float s) -> Tensor")
        lib.impl("f.int", lambda x, n: x + 100, "CPU")
        lib.impl("f", lambda x, s: x - 100, "CPU")
        fast_call.install([{"namespace": "bp_fast_call_test", "name": "f"}])
        packet = torch.ops.bp_fast_call_test.f
        assert type(packet) is OpOverloadPacket
        x = torch.zeros(2)
        assert torch.equal(packet(x, 3), x + 100) and torch.equal(packet(x, 3.0), x - 100)
    finally:
        _forget_library(lib, "bp_fast_call_test", "f")


def _forget_library(lib, namespace, name):
    """Removes the ops `lib` defined, and torch.ops' cached packet for them: torch 2.11 keeps
    the packet after the library goes, and whatever later walks every op in the process
    (the decomposition tables of torch.export, Inductor and the ONNX exporter) then asks it
    for an overload that no longer exists. Newer torch clears the cache itself."""
    lib._destroy()
    ns = getattr(torch.ops, namespace)
    if name in vars(ns):
        delattr(ns, name)
    if name in ns._dir:
        ns._dir.remove(name)
