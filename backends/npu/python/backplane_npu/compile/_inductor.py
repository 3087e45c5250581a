"""torch.compile's Inductor on npu: registered at load, imported when Inductor is.

What Inductor needs from a device, and what this gives it:
- a scheduling (code generation): Inductor's own C++ one, CppScheduling. The emulated
  device keeps its data in host memory, so CPU code computes on it (see
  _host_kernels.py); a vendor puts its own compiler here.
- a wrapper code generator: Inductor's Python wrapper, with two changes. Kernels are
  compiled by _host_kernels.compile_kernel (a trampoline the device can call without
  Python), and each kernel call is *queued on the current stream* of the device, like
  an eager kernel. That is the ordering rule: generated code does not synchronize; it is
  ordered with work queued before it (it cannot read a buffer an earlier kernel is
  still writing) and after it (later work cannot overtake it) by the stream alone.
  Extern calls (aten ops without a fused form, Backplane ops) go through the dispatcher
  to the device's kernels, which queue on the same stream; one the device has no kernel
  for takes the CPU fallback, which waits for the stream as in eager mode.
- device op overrides: how generated code names the device's guard and synchronize.
- a Dynamo device interface: streams, events, synchronize, device count, current device.

Registration waits for Inductor and Dynamo to be imported (backplane.import_hooks), so
loading the plugin costs nothing for programs that never compile; so do the few
answers of Inductor's adjusted for a device that generates C++ (_inductor_patches.py).
AOTInductor's C++ wrapper for the device is _aoti.NpuCppWrapperCodegen.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import torch

from backplane.import_hooks import when_imported
from . import _host_kernels, _reduce_overhead
from ._device_type import DEVICE as _DEVICE
from ._inductor_patches import treat_as_cpp

_plugin_files: list[str] = []  # the plugin library: its launch contract is part of the cache key


def on_load(lib) -> None:
    _plugin_files.append(lib._name)
    _host_kernels.on_load(lib)
    _reduce_overhead.on_load(lib)
    when_imported("torch._inductor.codegen.common", _register_inductor)
    when_imported("torch._dynamo.device_interface", _register_dynamo)
    treat_as_cpp(_DEVICE)


def _register_inductor(common) -> None:
    from . import _aoti

    common.register_backend_for_device(_DEVICE, _Scheduling, _LazyWrapper, getattr(_aoti, "NpuCppWrapperCodegen", None),
                                       device_custom_pass=_codegen_version())
    common.register_device_op_overrides(_DEVICE, _op_overrides(common.DeviceOpOverrides))


def _codegen_version():
    """A graph pass that changes nothing, there for its uuid: Inductor keys its FX graph
    cache by the custom passes' uuids, and this one hashes the device's code generation
    and the plugin library (which serves the generated code's launches), so a cache
    written by another version of either is never reused."""
    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

    compile_dir = os.path.dirname(__file__)
    files = tuple(os.path.join(folder, name) for folder in (os.path.dirname(compile_dir), compile_dir)
                  for name in sorted(os.listdir(folder)) if name.endswith(".py"))
    files += tuple(_plugin_files)

    class CodegenVersion(CustomGraphModulePass):
        def __call__(self, gm) -> None:
            pass

        def uuid(self):
            return get_hash_for_files(files)

    return CodegenVersion()


class _Scheduling:
    """Stands for Inductor's CppScheduling until Inductor makes one (Inductor wants a
    class here: it asks whether it is a Triton scheduling)."""

    def __new__(cls, scheduler):
        from torch._inductor.codegen.cpp import CppScheduling

        return CppScheduling(scheduler)


class _LazyWrapper:
    """Stands for the wrapper code generator until Inductor asks for one (its classes
    import the whole of Inductor's code generation)."""

    supports_caching = True  # the generated module reloads from the FX graph cache as is

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        from ._wrapper_codegen import create

        return create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)


def _op_overrides(base):
    module = f"torch.{_DEVICE}"

    class DeviceOpOverrides(base):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(_):\n    return 0\n"  # host kernels take no stream handle

        def set_device(self, device_idx: int) -> str:
            return f"{module}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"{module}.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"{module}.device({device_idx})"

    return DeviceOpOverrides()


@dataclasses.dataclass(frozen=True)
class _Properties:
    """What Inductor reads of a device: its processors are the host's cores, which do
    the emulated device's work (Inductor sizes split reductions by them)."""

    name: str
    multi_processor_count: int


def _register_dynamo(device_interface) -> None:
    device_interface.register_interface_for_device(_DEVICE, _interface(device_interface.DeviceInterface))


def _interface(base):
    mod = sys.modules[__package__.partition(".")[0]]  # torch.<device>

    class Interface(base):
        device = staticmethod(mod.device)
        Event = staticmethod(mod.Event)  # noqa: N815 (DeviceInterface's names)
        Stream = mod.Stream  # noqa: N815

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                mod.set_device(device)

            @staticmethod
            def current_device() -> int:
                return mod.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return _Properties(f"{_DEVICE} (emulated)", os.cpu_count() or 1)

        current_device = staticmethod(mod.current_device)
        set_device = staticmethod(mod.set_device)
        device_count = staticmethod(mod.device_count)
        is_available = staticmethod(mod.is_available)
        stream = staticmethod(mod.stream)
        current_stream = staticmethod(mod.current_stream)
        synchronize = staticmethod(mod.synchronize)
        memory_allocated = staticmethod(mod.memory_allocated)
        is_bf16_supported = staticmethod(mod.is_bf16_supported)

        @staticmethod
        def set_stream(stream: torch.Stream) -> None:
            torch.accelerator.set_stream(stream)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            previous = mod.current_device()
            if device >= 0 and device != previous:
                mod.set_device(device)
            return previous

        exchange_device = maybe_exchange_device

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return 0

        @staticmethod
        def get_compute_capability(device=None) -> str:
            return ""

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    return Interface
