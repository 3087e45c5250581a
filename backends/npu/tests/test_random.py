"""Random numbers on the npu device: a default generator per device, apart from the CPU's
and from the other devices', seeded by torch.manual_seed; states, fork_rng, generators
passed as `generator=`, dropout. An npu generator's state is a CPU generator's
(generator.h), so a seed gives the values the CPU gives for it; the tests use that as
their reference. `backplane new-backend NAME --dispatch-key PrivateUse1` copies this
file with the device renamed.
Run: python -m pytest tests (the plugin on BACKPLANE_PLUGIN_PATH or installed)."""
import copy
import inspect
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import backplane

backplane.load("npu")


def _same(got, expected):
    torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=0, atol=0)


def _cpu_randn(seed, n=5):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def _two_devices():
    if torch.npu.device_count() < 2:
        pytest.skip("one npu device")


def _draws(device="npu"):
    """One of each random op on `device`, as lists."""
    x = torch.ones(64, device=device, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    return [
        torch.randn(4, device=device).tolist(),
        torch.rand(4, device=device).tolist(),
        torch.randint(0, 1000, (4,), device=device).tolist(),
        torch.randperm(8, device=device).tolist(),
        torch.empty(4, device=device).normal_(2.0, 3.0).tolist(),
        torch.full((16,), 0.5, device=device).bernoulli_().tolist(),
        y.tolist(),
        x.grad.tolist(),
    ]


def test_same_seed_same_values_across_runs():
    code = ("import sys, torch, torch.nn.functional as F, backplane\nbackplane.load('npu')\n" + inspect.getsource(_draws)
            + "torch.manual_seed(int(sys.argv[1]))\nprint([_draws(f'npu:{i}') for i in range(torch.npu.device_count())])")

    def run(seed):
        done = subprocess.run([sys.executable, "-c", code, str(seed)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    first = run(2024)
    assert run(2024) == first
    assert run(2025) != first
    torch.manual_seed(2024)
    assert str([_draws(f"npu:{i}") for i in range(torch.npu.device_count())]) == first.strip()


def test_a_seed_gives_the_cpu_values_for_it():
    torch.manual_seed(7)
    _same(torch.randn(5, device="npu"), _cpu_randn(7))
    torch.npu.manual_seed(8)
    _same(torch.randn(5, device="npu"), _cpu_randn(8))
    assert torch.npu.initial_seed() == 8


def test_independent_of_the_cpu_generator():
    torch.manual_seed(3)
    torch.randn(100)  # CPU draws do not advance the npu generator
    _same(torch.randn(5, device="npu"), _cpu_randn(3))
    cpu_state = torch.get_rng_state()
    torch.randn(100, device="npu")  # nor npu draws the CPU's
    torch.npu.manual_seed_all(11)
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_independent_per_device():
    _two_devices()
    torch.manual_seed(0)
    first0 = torch.randn(5, device="npu:0")
    _same(torch.randn(5, device="npu:1"), first0)  # each device's first draw after the seed
    torch.npu.manual_seed_all(4)
    with torch.npu.device(1):
        torch.npu.manual_seed(5)  # seeds the current device only
        assert torch.npu.initial_seed() == 5
    assert torch.npu.initial_seed(0) == 4 and torch.npu.initial_seed("npu:1") == 5
    state0 = torch.npu.get_rng_state(0)
    _same(torch.randn(5, device="npu:1"), _cpu_randn(5))
    assert torch.equal(torch.npu.get_rng_state(0), state0)  # draws on npu:1 leave npu:0 alone
    _same(torch.randn(5, device="npu:0"), _cpu_randn(4))


def test_torch_manual_seed_and_seed_reach_every_device():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when a device module cannot be seeded
        torch.manual_seed(21)
    assert [torch.npu.initial_seed(i) for i in range(torch.npu.device_count())] == [21] * torch.npu.device_count()
    value = torch.seed()
    assert all(torch.npu.initial_seed(i) == value for i in range(torch.npu.device_count()))
    value = torch.npu.seed_all()
    assert all(torch.npu.initial_seed(i) == value for i in range(torch.npu.device_count()))
    assert torch.npu.seed() == torch.npu.initial_seed()
    torch.npu.manual_seed(-1)  # torch's remapping of negative seeds
    assert torch.npu.initial_seed() == torch.Generator().manual_seed(-1).initial_seed()


def test_state_round_trip():
    torch.npu.manual_seed_all(9)
    state = torch.npu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    assert torch.equal(state, torch.Generator(device="npu").manual_seed(9).get_state())
    drawn = torch.randn(5, device="npu")
    torch.npu.set_rng_state(state)
    _same(torch.randn(5, device="npu"), drawn)
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    drawn = [torch.rand(3, device=f"npu:{i}") for i in range(len(states))]
    torch.npu.set_rng_state_all(states)
    for i, expected in enumerate(drawn):
        _same(torch.rand(3, device=f"npu:{i}"), expected)


def test_fork_rng():
    devices = list(range(torch.npu.device_count()))
    torch.manual_seed(12)
    with torch.random.fork_rng(devices=devices, device_type="npu"):
        for i in devices:
            torch.randn(7, device=f"npu:{i}")
        torch.npu.manual_seed_all(1)
    for i in devices:
        _same(torch.randn(5, device=f"npu:{i}"), _cpu_randn(12))


def test_generator_argument():
    state = torch.npu.get_rng_state()
    g = torch.Generator(device="npu")
    assert g.device == torch.device("npu", torch.npu.current_device())
    g.manual_seed(13)
    _same(torch.randn(5, device="npu", generator=g), _cpu_randn(13))
    cpu = torch.Generator().manual_seed(13)
    torch.randn(5, generator=cpu)
    for draw in [lambda gen, d: torch.rand(4, device=d, generator=gen),
                 lambda gen, d: torch.randint(0, 50, (4,), device=d, generator=gen),
                 lambda gen, d: torch.randperm(6, device=d, generator=gen),
                 lambda gen, d: torch.empty(4, device=d).normal_(generator=gen),
                 lambda gen, d: torch.full((8,), 0.5, device=d).bernoulli_(generator=gen),
                 lambda gen, d: torch.multinomial(torch.ones(6, device=d), 3, generator=gen)]:
        _same(draw(g, "npu"), draw(cpu, "cpu"))
    assert torch.equal(torch.npu.get_rng_state(), state)  # the default generator was not used
    clone = copy.deepcopy(g)
    _same(torch.randn(5, device="npu", generator=clone), torch.randn(5, device="npu", generator=g))


def test_generator_of_another_device_index():
    _two_devices()
    g = torch.Generator(device="npu:1").manual_seed(14)  # as on CUDA, any npu generator serves any npu device
    _same(torch.randn(5, device="npu:0", generator=g), _cpu_randn(14))


def test_draws_follow_program_order_across_streams():
    # Random ops draw on the calling thread when called, whichever stream their copies
    # queue on.
    torch.npu.manual_seed(15)
    with torch.npu.stream(torch.npu.Stream()):
        a = torch.randn(3, device="npu")
    b = torch.randn(3, device="npu")
    cpu = torch.Generator().manual_seed(15)
    _same(a, torch.randn(3, generator=cpu))
    _same(b, torch.randn(3, generator=cpu))


def test_dropout():
    x = torch.ones(1000, device="npu", requires_grad=True)
    torch.manual_seed(16)
    torch.randn(10)  # a CPU draw: dropout on npu does not use the CPU generator
    y = F.dropout(x, 0.3)
    y.sum().backward()
    torch.manual_seed(16)
    _same(y.detach(), F.dropout(torch.ones(1000), 0.3))
    _same(x.grad, (y != 0).float() / 0.7)
    torch.manual_seed(16)
    _same(torch.nn.Dropout(0.3)(torch.ones(1000, device="npu")), y.detach())
    out, mask = torch.native_dropout(torch.ones(4, device="npu"), 0.5, False)
    _same(out, torch.ones(4))
    _same(mask, torch.ones(4, dtype=torch.bool))
    out, mask = torch.native_dropout(torch.ones(0, device="npu"), 0.5, True)
    assert out.numel() == 0 and mask.numel() == 0
    q = torch.randn(1, 2, 4, 8, device="npu")
    torch.manual_seed(17)
    first = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    torch.manual_seed(17)
    _same(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5), first)


def test_errors():
    with pytest.raises(RuntimeError, match=r"got a generator on cpu; expected an npu generator"):
        torch.randn(3, device="npu", generator=torch.Generator())
    with pytest.raises(RuntimeError, match="out of range"):
        torch.npu.get_rng_state(torch.npu.device_count() + 3)
    with pytest.raises(RuntimeError, match=r"device index -3 out of range.*\(or -1: the current device\)"):
        torch.npu.get_rng_state(-3)  # not the current device's state, silently
    with pytest.raises(RuntimeError, match="out of range"):
        torch.Generator(device=f"npu:{torch.npu.device_count() + 3}")
    with pytest.raises(ValueError, match="expected an npu device, got cpu"):
        torch.npu.get_rng_state("cpu")
    with pytest.raises(TypeError, match="expected an RNG state, a CPU torch.uint8 tensor"):
        torch.npu.set_rng_state(torch.zeros(8))
    with pytest.raises(RuntimeError, match="RNG state"):
        torch.npu.set_rng_state(torch.zeros(8, dtype=torch.uint8))  # torch's own size check
    with pytest.raises(RuntimeError, match="no offset"):
        torch.Generator(device="npu").set_offset(5)
    # A random op with no Generator argument would draw from the CPU's generator on the
    # CPU fallback: refused, naming the op.
    q = torch.randn(1, 2, 4, 8, device="npu")
    with pytest.raises(NotImplementedError, match="_scaled_dot_product_flash_attention_for_cpu .*without a Generator"):
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.5)


def test_device_indices_do_not_wrap():
    # ctypes narrowed 2**32 + 1 to 1: set_rng_state overwrote npu:1's generator, and
    # initial_seed(2**32) answered npu:0's. test_device.py refuses out-of-range indices
    # for every function that takes a device; here, that npu:1's state is left alone.
    _two_devices()
    torch.npu.manual_seed_all(5)
    npu1 = torch.npu.get_rng_state(1)
    with pytest.raises(RuntimeError, match=r"device index 4294967297 out of range; expected 0 <= index < "):
        torch.npu.set_rng_state(torch.Generator().manual_seed(6).get_state(), 2**32 + 1)
    _same(torch.npu.get_rng_state(1), npu1)
    with pytest.raises(RuntimeError, match=r"device index 4294967296 out of range; expected 0 <= index < "):
        torch.npu.initial_seed(2**32)


def test_checkpoint_recomputes_the_same_dropout():
    # torch.utils.checkpoint saves and restores the device's RNG state (torch.npu's
    # get/set_rng_state) so that the recomputed forward drops the same elements.
    from torch.utils.checkpoint import checkpoint

    def block(x):
        return F.dropout(x * 2, 0.5) * 3

    x = torch.ones(256, device="npu:1" if torch.npu.device_count() > 1 else "npu", requires_grad=True)
    torch.manual_seed(18)
    block(x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    torch.manual_seed(18)
    checkpoint(block, x, use_reentrant=False).sum().backward()
    _same(x.grad, expected)
