"""Sample arguments for every registry op, derived from the registry (the same samples the
conformance suite uses), shared by the opcheck, compile, export and device tests."""
import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
_DTYPE_NAMES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16}


def op_names():
    """Every registry op, in registry order: what the tests are parametrized over."""
    import backplane

    return [op.name for op in backplane.ops()]


def why_cuda_unavailable() -> str:
    """Why the CUDA tests cannot run in this process (no GPU, or the cuda plugin did not
    load), or "" where they can; loads the plugin."""
    import backplane

    if not torch.cuda.is_available():
        return "no CUDA device in this process (torch.cuda.is_available() is False)"
    try:
        backplane.load("cuda")
    except backplane.BackendError as e:
        return f"the cuda plugin did not load: {e}"
    return ""


def require_kernel(op_name, *backends):
    """Skips the test, saying why, where a loaded backend does not implement the op (a
    partial backend is normal: an op may be in the registry before any kernel)."""
    import backplane
    import pytest

    loaded = {b.name: b for b in backplane.backends() if b.status == "loaded"}
    for name in backends:
        if name in loaded and op_name not in loaded[name].ops:
            pytest.skip(f"{op_name}: not implemented on {name}")


def samples(dtype=torch.float32, device="cpu", per_op=3):
    """op name -> list of (args, kwargs): the op's first `per_op` registry samples as
    backplane.sample_call gives them (sample i drawn from seed i), plus the first again with
    every Tensor argument of 2 or more dimensions strided (a view of every other column of
    a tensor twice as wide, holding the same values; NaN between them). Ops that do not
    take `dtype` get no samples for it."""
    import backplane

    def every_other_column(value):
        """A view of value's values, every other column of a base whose other columns are
        NaN (a kernel that reads them fails every time); a copy of value where it has fewer
        than 2 dimensions, so an in-place op on the first case leaves this one alone."""
        if not isinstance(value, torch.Tensor):
            return value
        if value.dim() < 2:
            return value.clone()
        wide = value.new_full(value.shape[:-1] + (2 * value.shape[-1],), float("nan"))
        wide[..., ::2] = value
        return wide[..., ::2]

    out = {}
    for op in backplane.ops():
        if dtype not in [_DTYPE_NAMES[d] for d in op.dtypes if d in _DTYPE_NAMES]:
            out[op.name] = []
            continue
        cases = []
        for index in range(min(per_op, len(op.samples))):
            args, kwargs = backplane.sample_call(op, index, dtype=dtype, device=device, seed=index)
            cases.append((tuple(args), kwargs))
        args, kwargs = cases[0]
        cases.append((tuple(every_other_column(a) for a in args),
                      {k: every_other_column(v) for k, v in kwargs.items()}))
        out[op.name] = cases
    return out


def differentiable_call(op, args, kwargs, differentiable):
    """(fn, inputs) for torch.autograd.gradcheck of the call op(*args, **kwargs): inputs are
    copies, requiring grad, of its Tensor arguments named in `differentiable` (those with a
    registry backward), positional or keyword alike; fn(*inputs) makes the call with them
    in their places and every other argument as given."""
    names = [a.name for a in op._schema.arguments]
    positional = names[:len(args)]
    named = dict(zip(positional, args)) | kwargs
    grad_names = [n for n in names if n in differentiable and isinstance(named.get(n), torch.Tensor)]
    inputs = tuple(named[n].detach().clone().requires_grad_() for n in grad_names)

    def fn(*grads):
        values = {**named, **dict(zip(grad_names, grads))}
        return op(*(values[n] for n in positional), **{n: values[n] for n in kwargs})

    return fn, inputs


def results(op, returned, args, kwargs):
    """The tensors a call of `op` (an OpOverload or OpOverloadPacket) produced: its new
    outputs (one, or several for ops such as rms_norm_backward), else the argument it
    wrote (in place or out=)."""
    if isinstance(returned, torch.Tensor):
        return [returned]
    if isinstance(returned, (tuple, list)) and returned:
        return list(returned)
    schema = getattr(op, "_schema", None) or op.default._schema
    written = [a for a in schema.arguments if a.alias_info and a.alias_info.is_write][0]
    if written.name in kwargs:
        return [kwargs[written.name]]
    return [args[schema.arguments.index(written)]]


def twin_call(args, kwargs):
    """A copy of a call's arguments for a second call of the same op: each tensor with the
    same sizes, strides and offset in storage of its own (clone() would make a strided view
    contiguous, and so pick another kernel), so that ops writing an argument leave the
    first call's inputs alone; anything else as it is."""
    def twin(value):
        if not isinstance(value, torch.Tensor):
            return value
        return torch.empty(0, dtype=value.dtype, device=value.device).set_(
            value.untyped_storage().clone(), value.storage_offset(), value.size(), value.stride())

    return [twin(v) for v in args], {k: twin(v) for k, v in kwargs.items()}


def block(x, y, w):
    """A small model of the ops in a row, for compile and graph-capture tests."""
    h = torch.ops.backplane.add(x, y, alpha=0.5)
    h = torch.ops.backplane.rms_norm(h, w, 1e-5)
    out = torch.empty_like(h)
    torch.ops.backplane.sin_out(h, out=out)
    torch.ops.backplane.scale_(out, 3.0)
    return torch.ops.backplane.identity_conv(out)
