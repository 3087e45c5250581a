"""The child processes of test_package_provenance.py: each loads the cpu_alt fixture plugin
(identity_conv = -x there; from $FIXTURES) beside cpu, which no test process may keep loaded.

    make OUT            a package of identity_conv(x), x (batch, 8), batch 2..1024, made with the plain
                        torch._inductor.aoti_compile_and_package under OUT/split.yaml (cpu_alt up to
                        64 elements, cpu above), and OUT/io.pt: batch 2 (cpu_alt: -x), 16 (cpu: x)
    load PKG IO [SEL]   backplane.load_package(PKG) (SEL applied first), then its cases: prints a JSON
                        line {refused: message or null, hint_ran: the refusal's apply_selection call
                        run and the load retried, matches: [bool per case], notes}
    allow PKG IO        the same with allow_plugin_change=True
"""
import json
import os
import re
import sys
from pathlib import Path

import torch

import backplane
from backplane.aoti.plugins import PluginMismatch

FIXTURES = os.environ["FIXTURES"]  # where the build put the cpu_alt plugin (the test sets it)
SPLIT = """backplane_selection: 1
ops:
  - op: identity_conv
    dispatch_key: CPU
    buckets:
      - {up_to: 64, plugin: cpu_alt}
      - {plugin: cpu}
"""


class Conv(torch.nn.Module):
    def forward(self, x):
        return torch.ops.backplane.identity_conv(x)


def make(out: Path) -> None:
    from torch._inductor import config

    from backplane.aoti.libstdcxx import choose_cxx

    (out / "split.yaml").write_text(SPLIT)
    backplane.apply_selection(out / "split.yaml")
    batch = torch.export.Dim("batch", min=2, max=1024)
    ep = torch.export.export(Conv(), (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
    with config.patch({"cpp.cxx": (None, choose_cxx(None))}):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "conv.pt2"))
    cases = [{"batch": b, "inputs": [x], "expected": [Conv()(x)]} for b in (2, 16) for x in [torch.randn(b, 8)]]
    torch.save({"atol": 0.0, "rtol": 0.0, "cases": cases}, out / "io.pt")


def run_cases(package, io: Path) -> list[bool]:
    cases = torch.load(io, weights_only=True)["cases"]
    return [torch.equal(package(*c["inputs"]), c["expected"][0]) for c in cases]


def load(path: str, io: Path, allow: bool) -> dict:
    outcome = {"refused": None, "hint_ran": False}
    try:
        package = backplane.load_package(path, allow_plugin_change=allow)
    except PluginMismatch as e:
        outcome["refused"] = str(e)
        hint = re.search(r"backplane\.apply_selection\('[^']*'\)", str(e))
        if hint is None:
            return outcome
        eval(hint.group(0), {"backplane": backplane})  # the hint, as a user would paste it
        outcome["hint_ran"] = True
        package = backplane.load_package(path)
    return {**outcome, "matches": run_cases(package, io), "notes": package.plugins}


def main(argv: list[str]) -> None:
    backplane.load("cpu")
    backplane.load("cpu_alt", path=FIXTURES)
    if argv[0] == "make":
        make(Path(argv[1]))
        return
    if len(argv) > 3:
        backplane.apply_selection(argv[3])
    print(json.dumps(load(argv[1], Path(argv[2]), allow=argv[0] == "allow")))


if __name__ == "__main__":
    main(sys.argv[1:])
