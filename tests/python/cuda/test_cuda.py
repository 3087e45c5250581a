"""The CUDA backend from Python: the ops against PyTorch on the GPU, opcheck, and a
CUDA-graph capture (torch.compile mode="reduce-overhead") against eager. Skips, with
the reason, where the plugin was not built or no GPU is present."""
import math

import pytest
import torch

import backplane
from samples import DTYPES, block, require_kernel, results, samples, twin_call, why_cuda_unavailable


_why_not = why_cuda_unavailable()
pytestmark = pytest.mark.skipif(bool(_why_not), reason=_why_not)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op_name", list(samples()))
def test_opcheck_cuda(op_name, dtype):
    require_kernel(op_name, "cuda")
    op = getattr(torch.ops.backplane, op_name).default
    for args, kwargs in samples(dtype, "cuda")[op_name]:
        torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cuda_graph_capture_matches_eager(dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 1024, device="cuda", dtype=dtype, generator=g)
    y = torch.randn(1024, device="cuda", dtype=dtype, generator=g)
    w = torch.rand(1024, device="cuda", dtype=dtype, generator=g) + 0.5
    expected = block(x, y, w)
    graphed = torch.compile(block, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # the first calls record; later ones replay the CUDA graph
        got = graphed(x, y, w)
    torch.cuda.synchronize()
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("op_name", list(samples()))
def test_fast_call_gives_what_torch_ops_gives(op_name):
    # backplane.fast_call on CUDA tensors: the same results as torch.ops' own path, and
    # the output on the input's device. Skips where the extension was not built.
    from backplane import fast_call

    if fast_call.status() != "on":
        pytest.skip(f"fast call {fast_call.status()}")
    require_kernel(op_name, "cuda")
    packet = getattr(torch.ops.backplane, op_name)
    assert type(packet) is not torch._ops.OpOverloadPacket, "the fast call is installed"
    for args, kwargs in samples(torch.float32, "cuda")[op_name]:
        fast_args, fast_kwargs = twin_call(args, kwargs)
        fast = results(packet, packet(*fast_args, **fast_kwargs), fast_args, fast_kwargs)
        slow = results(packet, packet._op(*args, **kwargs), args, kwargs)  # torch's own path
        for f, s in zip(fast, slow, strict=True):
            assert f.device == s.device and torch.equal(f, s)


def test_ops_follow_the_current_stream():
    # Work queued on a side stream must see that stream's order: a kernel launched on
    # the default stream instead would race with the fill below.
    side = torch.cuda.Stream()
    x = torch.empty(1 << 22, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)  # keep the stream busy so a race would show
        x.fill_(2.0)
        y = torch.ops.backplane.identity_conv(x)
        torch.ops.backplane.scale_(y, 0.5)
    side.synchronize()
    assert torch.equal(y, torch.ones_like(y))


def test_kernels_launched_early_read_what_the_kernel_before_wrote():
    # A kernel here may start before the one ahead of it in the stream has finished
    # (dependent launch: backends/cuda/kernels/dependent_launch.cuh) and must wait before it
    # reads. A chain of ops, each reading the last one's output, queued behind a sleep so
    # that every launch is in the stream before the kernel ahead of it runs; inputs of
    # several waves of blocks. Exact where the ops are (powers of two), else within rounding.
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4096, 4096, device="cuda", generator=g)
    w = torch.rand(4096, device="cuda", generator=g) + 0.5
    torch.cuda._sleep(10_000_000)
    y = x
    for _ in range(4):
        y = torch.ops.backplane.identity_conv(y)
        torch.ops.backplane.scale_(y, 2.0)
        y = torch.ops.backplane.add(y, y)
    normed = torch.ops.backplane.rms_norm(y, w, 1e-6)
    probs = torch.ops.backplane.softmax(normed)
    dx, dw = torch.ops.backplane.rms_norm_backward(probs, normed, w, 1e-6)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 256)
    ref_normed = torch.nn.functional.rms_norm(y.double(), (4096,), w.double(), 1e-6)
    ref_probs = torch.softmax(ref_normed, -1)
    # The backward's reference: autograd of aten's rms_norm in float64 at the same point.
    at_x, at_w = ref_normed.clone().requires_grad_(), w.double().requires_grad_()
    ref_dx, ref_dw = torch.autograd.grad(torch.nn.functional.rms_norm(at_x, (4096,), at_w, 1e-6), (at_x, at_w),
                                         ref_probs)
    torch.testing.assert_close(normed, ref_normed.float())
    torch.testing.assert_close(probs, ref_probs.float())
    # dx is about 1e-4 an element (median; 0.2 at most), so assert_close's atol of 1e-5 would
    # pass nearly anything; 1e-7 still covers the cancellation in dx's two terms (3.6e-9 at
    # most from the CPU plugin on these inputs).
    torch.testing.assert_close((dx, dw), (ref_dx.float(), ref_dw.float()), rtol=1e-4, atol=1e-7)


def test_cpu_tensor_mixed_in_is_refused():
    with pytest.raises(RuntimeError, match="backplane::add: arguments 'a' and 'b' must be on one device, found cuda:0 and cpu"):
        torch.ops.backplane.add(torch.ones(3, device="cuda"), torch.ones(3))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_device():
    with torch.cuda.device(0):
        x = torch.randn(1000, device="cuda:1")
        w = torch.rand(1000, device="cuda:1")
        got = torch.ops.backplane.rms_norm(x.view(10, 100), w[:100], 1e-6)
    assert got.device == torch.device("cuda:1")
    ref = x.view(10, 100).double()
    ref = (ref * torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-6) * w[:100].double()).float()
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_device_follows_its_current_stream():
    # As above, on cuda:1 while cuda:0 is the current device: the kernels must launch on
    # cuda:1's current stream (the side stream), not on cuda:0's or cuda:1's default one.
    side = torch.cuda.Stream(device="cuda:1")
    x = torch.empty(1 << 22, device="cuda:1")
    torch.cuda.set_device(0)
    with torch.cuda.stream(side):  # makes cuda:1 current inside; the op's guard must keep to it
        torch.cuda._sleep(10_000_000)
        x.fill_(2.0)
        y = torch.ops.backplane.identity_conv(x)
        torch.ops.backplane.scale_(y, 0.5)
        z = torch.ops.backplane.add(y, y, alpha=2.0)
    side.synchronize()
    assert y.device == z.device == torch.device("cuda:1")
    assert torch.equal(y, torch.ones_like(y)) and torch.equal(z, torch.full_like(z, 3.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_inputs_larger_than_the_device_holds_match_cpu(dtype):
    # The elementwise engine moves inputs of at most one item per resident thread one item
    # a thread, larger ones in tiles of several (elementwise.cuh), and registry samples are
    # all small. Every op whose first sample's tensors share one shape runs here with that
    # shape's first dimension grown to two vectors or more per resident thread (rows stay
    # short: a row op's float32 sum over a million-element row differs between any two
    # summation orders beyond assert_close's float32 tolerance), plus one row, so the last
    # tile is partial and an odd tail is left, against the same op on the CPU: contiguous
    # (the vectorized kernel) and as every other element of rows twice as long (the
    # strided kernel). (Offset starts are the registry samples' `offset` layout.)
    backplane.load("cpu")
    loaded = {b.name: set(b.ops) for b in backplane.backends() if b.status == "loaded"}
    props = torch.cuda.get_device_properties(0)
    target = props.multi_processor_count * props.max_threads_per_multi_processor * 16
    checked = []
    for op in backplane.ops():
        if not op.samples or op.name not in loaded["cpu"] & loaded["cuda"]:
            continue
        args, kwargs = backplane.sample_call(op, dtype=dtype)
        shapes = {tuple(a.shape) for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)}
        if len(shapes) != 1 or len(next(iter(shapes))) == 0:
            continue
        shape = list(next(iter(shapes)))
        shape[0] = shape[0] * -(-target // math.prod(shape)) + 1  # at least `target` elements, and odd
        for strided in (False, True):
            g = torch.Generator().manual_seed(len(checked))
            base = shape[:-1] + [shape[-1] * (2 if strided else 1)]
            view = (lambda t: t[..., ::2]) if strided else (lambda t: t)
            made = {}

            def on(device, a):
                # The same values on both devices: each tensor argument drawn once, moved
                # whole, then viewed (both devices' arguments exist before either call).
                if not isinstance(a, torch.Tensor):
                    return a
                if id(a) not in made:
                    made[id(a)] = torch.randn(base, generator=g).to(dtype)
                return view(made[id(a)].to(device))

            cpu_args, cpu_kwargs = [on("cpu", a) for a in args], {k: on("cpu", v) for k, v in kwargs.items()}
            cuda_args, cuda_kwargs = [on("cuda", a) for a in args], {k: on("cuda", v) for k, v in kwargs.items()}
            packet = backplane.torch_op(op.name)
            expected = results(packet, packet(*cpu_args, **cpu_kwargs), cpu_args, cpu_kwargs)
            got = results(packet, packet(*cuda_args, **cuda_kwargs), cuda_args, cuda_kwargs)
            for e, c in zip(expected, got, strict=True):
                torch.testing.assert_close(c.cpu(), e,
                                           msg=lambda m, name=op.name, s=strided: f"{name} (strided={s}): {m}")
            checked.append(op.name)
    assert checked, "no registry op with same-shape tensor arguments to check"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", [2056, 4096, 4104, 16384])
def test_softmax_and_its_backward_over_many_long_rows_match_torch(n, dtype):
    # softmax.cu and softmax_backward.cu give many rows (4 or more a multiprocessor) of
    # register-held length a block per row, and few rows a grid of resident blocks: the
    # registry's samples have few rows, so the many-rows kernels are checked here. 2056
    # and 4104 are whole vectors that leave the last warp's lanes partly empty.
    rows = 4 * torch.cuda.get_device_properties(0).multi_processor_count + 3
    generator = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(rows, n, device="cuda", dtype=dtype, generator=generator)
    y = torch.ops.backplane.softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    grad = torch.randn(rows, n, device="cuda", dtype=dtype, generator=generator)
    torch.testing.assert_close(torch.ops.backplane.softmax_backward(grad, y),
                               torch._softmax_backward_data(grad, y, -1, dtype))
