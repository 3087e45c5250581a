"""argv: FIXTURES SELECTION PACKAGE: an AOTInductor package made where the file sends
identity_conv to `inductor` holds Inductor's code for it: the package calls no Backplane op
and records no plugin for it (it needs none)."""
import sys

from compile_selection import backplane, torch
from backplane.aoti.plugins import package_calls, read_record


class Model(torch.nn.Module):
    def forward(self, t):
        return torch.ops.backplane.identity_conv(t) * 2


x = torch.randn(4, 25)
ep = torch.export.export(Model(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[3])
assert package_calls(path, {"identity_conv"}) == set()
assert read_record(path) is None, read_record(path)
assert [r["choice"] for r in backplane.compile.resolutions()] == ["inductor"]
print("ok")
