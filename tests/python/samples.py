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
    """op name -> list of (args, kwargs): the op's first `per_op` registry samples with
    random values, plus the first again with every Tensor argument of 2 or more
    dimensions strided (a view of every other column). Ops that do not take `dtype` get
    no samples for it."""
    import backplane

    g = torch.Generator().manual_seed(0)

    def tensor(sizes, strided):
        if strided and len(sizes) >= 2:
            wide = list(sizes[:-1]) + [sizes[-1] * 2]
            return torch.randn(wide, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)[..., ::2]
        return torch.randn(sizes, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)

    out = {}
    for op in backplane.ops():
        if dtype not in [_DTYPE_NAMES[d] for d in op.dtypes if d in _DTYPE_NAMES]:
            out[op.name] = []
            continue
        schema = backplane.torch_op(op.name).default._schema
        chosen = [(s, False) for s in op.samples[:per_op]] + [(op.samples[0], True)]
        cases = []
        for sample, strided in chosen:
            args, kwargs = [], {}
            for arg in schema.arguments:
                if arg.name not in sample["args"]:
                    continue  # the schema default
                value = sample["args"][arg.name]
                if arg.name in op.tensor_args:
                    value = tensor(value, strided)
                (kwargs.__setitem__(arg.name, value) if arg.kwarg_only else args.append(value))
            cases.append((tuple(args), kwargs))
        out[op.name] = cases
    return out


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
