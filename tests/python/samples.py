"""Sample arguments for every registry op, shared by the opcheck, compile and export tests."""
import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def samples(dtype=torch.float32, device="cpu"):
    """op name -> list of (args, kwargs); random values, several shapes and layouts each."""
    g = torch.Generator().manual_seed(0)

    def t(*sizes):
        return torch.randn(*sizes, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)

    strided = t(4, 10)[:, ::2]
    return {
        "identity_conv": [((t(3, 5),), {}), ((strided,), {}), ((t(0, 2),), {})],
        "add": [((t(3, 5), t(3, 5)), {}), ((t(4, 1, 5), t(3, 5)), {"alpha": 2.5}), ((strided, t(5)), {})],
        "scale_": [((t(3, 5), 1.5), {}), ((t(7), -2.0), {})],
        "sin_out": [((t(3, 5),), {"out": t(3, 5)}), ((strided,), {"out": t(4, 5)}), ((t(0, 3),), {"out": t(0, 3)})],
        "crop": [((t(3, 8, 8), [1, 2, 4, 5]), {}), ((t(6, 7), [0, 0, 6, 7]), {})],
        "rms_norm": [((t(4, 16), t(16)), {}), ((t(2, 3, 8), t(8), 1e-3), {}), ((strided, t(5)), {})],
    }


def block(x, y, w):
    """A small model of the ops in a row, for compile and graph-capture tests."""
    h = torch.ops.backplane.add(x, y, alpha=0.5)
    h = torch.ops.backplane.rms_norm(h, w, 1e-5)
    out = torch.empty_like(h)
    torch.ops.backplane.sin_out(h, out=out)
    torch.ops.backplane.scale_(out, 3.0)
    return torch.ops.backplane.identity_conv(out)
