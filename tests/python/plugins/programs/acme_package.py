"""argv: ACME_DIR OUT: OUT/m.pt2, an AOTInductor package calling acme::fused_gelu (batch
2..64, with Backplane's layout record), and OUT/io.pt, its cases for `backplane run`."""
import sys
from pathlib import Path

from acme_prelude import torch

from torch._inductor import config
from backplane.aoti.libstdcxx import choose_cxx
from backplane.aoti.layouts import add_layouts

out = Path(sys.argv[2])


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.ops.acme.fused_gelu(x) * 2


batch = torch.export.Dim("batch", min=2, max=64)
ep = torch.export.export(Model(), (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
with config.patch({"cpp.cxx": (None, choose_cxx(None))}):
    torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "m.pt2"))
add_layouts(str(out / "m.pt2"), ep)
cases = []
for b in (2, 5):
    x = torch.randn(b, 8)
    cases.append({"batch": b, "inputs": [x], "expected": [torch.nn.functional.gelu(x) * 2]})
torch.save({"atol": 1e-6, "rtol": 1e-5, "cases": cases}, str(out / "io.pt"))
