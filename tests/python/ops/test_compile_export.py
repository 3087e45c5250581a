"""Every op under torch.compile(fullgraph=True) and torch.export, against eager."""
import torch

b = torch.ops.backplane


class AllOps(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5, requires_grad=False)

    def forward(self, x, y):
        h = b.identity_conv(x)
        h = b.add(h, y, alpha=0.5)
        h = b.rms_norm(h, self.weight, 1e-5)
        h = h.clone()
        b.scale_(h, 2.0)
        out = torch.empty_like(h)
        b.sin_out(h, out=out)
        return b.crop(out, [1, 2, 3, 4])


def inputs(batch=4, rows=6, hidden=8):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, rows, hidden, generator=g), torch.randn(rows, hidden, generator=g)


def test_compile_fullgraph_matches_eager():
    model = AllOps(8)
    x, y = inputs()
    expected = model(x, y)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), expected)


def test_export_runs_and_keeps_the_ops():
    model = AllOps(8)
    x, y = inputs()
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(model, (x, y), dynamic_shapes=({0: batch}, None))
    graph = str(ep.graph_module.code)
    for name in ("identity_conv", "add", "rms_norm", "crop"):
        assert f"backplane.{name}" in graph, graph
    torch.testing.assert_close(ep.module()(x, y), model(x, y))
    x7, _ = inputs(batch=7)
    torch.testing.assert_close(ep.module()(x7, y), model(x7, y))  # another batch size
