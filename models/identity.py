"""`identity`: four layers whose product is the identity, so output equals input bit
for bit in every mode. It exercises a native conv, a torchbind object (IdentityConv),
a registry op, and a native conv again: the layout changes Inductor makes around convs
are what exposed a wrong fake class once (docs/aoti-findings.md).
"""
import torch

import backplane  # noqa: F401  (defines torch.ops.backplane and torch.classes.backplane)

from .spec import ModelSpec

CHANNELS = 4


def unit_depthwise_conv(channels: int) -> torch.nn.Conv2d:
    # dilation=2 changes nothing for a 1x1 kernel, but keeps the package's batch range the
    # exported 2..1024: for an undilated, unstrided 1x1 conv, ATen's CPU backend choice
    # asks "batch >= 16?", and Inductor turned the example's answer into a compiled range
    # of 2..15 (docs/aoti-findings.md).
    conv = torch.nn.Conv2d(channels, channels, kernel_size=1, groups=channels, bias=False, dilation=2)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    return conv


class ClassLayer(torch.nn.Module):
    """Holds a torch.classes.backplane.IdentityConv and calls its forward."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = torch.classes.backplane.IdentityConv(channels)

    def forward(self, x):
        return self.conv.forward(x)


class OpLayer(torch.nn.Module):
    def forward(self, x):
        return torch.ops.backplane.identity_conv(x)


class IdentityModel(torch.nn.Sequential):
    def __init__(self, channels: int = CHANNELS):
        super().__init__(unit_depthwise_conv(channels), ClassLayer(channels), OpLayer(), unit_depthwise_conv(channels))


def build(device, dtype):
    return IdentityModel().to(device=device, dtype=dtype).eval()


def inputs(batch, device, dtype):
    g = torch.Generator().manual_seed(batch)
    return (torch.randn(batch, CHANNELS, 5, 7, generator=g).to(device=device, dtype=dtype),)


def reference(model, x):
    return x


SPEC = ModelSpec(
    name="identity",
    doc="native conv -> IdentityConv object -> backplane::identity_conv -> native conv; output == input",
    build=build,
    inputs=inputs,
    reference=reference,
    tolerances={torch.float32: (0.0, 0.0)},
    dtypes=(torch.float32,),
)
