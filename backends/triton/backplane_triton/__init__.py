"""Backplane's Triton plugin: Triton kernels for registry ops on CUDA devices.

`kernels()` gives op name -> launcher (see _registry.py for the calling convention);
importing this package imports every kernel module, which fills the table.
"""
from ._registry import kernel
# `kernels` is the subpackage of kernel modules, made callable: kernels() is the table,
# and `import backplane_triton.kernels.add` still finds the module (a function of that
# name here would hide the subpackage from attribute lookups).
from . import kernels

__all__ = ["kernel", "kernels"]
