"""Inductor's Python wrapper code generator for npu: the CPU one, with kernels queued.

Imported when Inductor first generates code for the device. Two changes to
PythonWrapperCodegen (and to its subgraph form, for control flow):
- a C++ kernel's definition compiles through _host_kernels.compile_kernel rather than
  async_compile.cpp_pybinding, which returns a callable that queues the kernel on the
  current stream (the Python binding would run it at once, on addresses it cannot read);
- the call of such a kernel is written for the device instead of refused ("device npu
  nyi" in torch's wrapper);
- buffers are allocated on the graph's device index (Inductor guards the current
  device only for GPU types, so it would allocate on the current device).
"""
from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

from ._device_type import DEVICE as _DEVICE

_PYBINDING = "async_compile.cpp_pybinding("
_COMPILE = "_host_kernels.compile_kernel"


class _QueuedHostKernels:
    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(f"from {__package__} import _host_kernels")

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        if not gpu and kernel_body.lstrip().startswith(_PYBINDING):
            kernel_body = kernel_body.replace(_PYBINDING, f"{_COMPILE}(async_compile, {kernel_name!r}, ", 1)
        super().define_kernel(kernel_name, kernel_body, metadata=metadata, gpu=gpu, cpp_definition=cpp_definition)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        # Inductor writes `device='npu'` (the current device) for devices it guards with
        # no device context; the index keeps a graph on npu:1 allocating there.
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == _DEVICE and device.index is not None:
            line = line.replace(f"device='{_DEVICE}'", f"device='{device}'")
        return line

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        from torch._inductor.virtualized import V

        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == _DEVICE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class WrapperCodegen(_QueuedHostKernels, PythonWrapperCodegen):
    pass


class SubgraphWrapperCodegen(_QueuedHostKernels, SubgraphPythonWrapperCodegen):
    pass


def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
    if is_subgraph:
        return SubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
    return WrapperCodegen()
