"""AOTInductor's C++ wrapper for npu: packages whose generated code runs as device work.

Contract with _inductor.py: NpuCppWrapperCodegen is registered as the device's cpp
wrapper code generator at the moment Inductor's codegen.common module finishes
importing, so this module imports nothing of Inductor's code generation at module level:
NpuCppWrapperCodegen is a stand-in with a static `create`, and the real class is made on
the first compile.

What torch's AOTInductor lacks for a PrivateUse1 device, and what this supplies (the
runtime half is aoti_runner.cpp; docs/aoti-findings.md section 5 says why each is needed):
- Kernel calls. CppWrapperCpu calls a C++ kernel directly with `tensor.data_ptr()`,
  which for npu is a device address the host cannot read. Here each call is queued on
  the current stream through the plugin's launcher, with a trampoline (a captureless
  lambda) that unpacks translated addresses and scalars into the kernel's arguments.
  The model library does not link the plugin: the plugin's runner binds the launcher
  into it (`backplane_npu_aoti_bind`) once it has loaded it.
- Extern calls (aten ops Inductor does not fuse: mm, addmm, convolution...). The wrapper
  calls `aoti_torch_<device>_<op>`, a C shim libtorch has for cpu, cuda, xpu and mps
  only. This emits each shim used into the package itself, written by torchgen as torch
  writes its device-generic `aoti_torch_aten_*` shims: a call of the `at::` function,
  that is, through the dispatcher to the device's kernel (queued on the same stream).
  Backplane ops and aten ops without a shim go through the proxy executor as on cpu.
- The model's device. The runtime's parse_device_str accepts cpu|cuda|xpu|mps only
  (torch/csrc/inductor/aoti_runtime/model_base.h): the generated constructor gives the
  base "cpu", and the device type (privateuse1) and index are set when the runner binds.
- Buffers and constants on the device: allocations name privateuse1
  (`aoti_torch_empty_strided`). The container loads constants with malloc and memcpy
  for any device but CUDA, XPU and MPS: the model loads as a cpu model, and the runner
  then moves it (its device and its constants) onto the device (_retarget_constructor).
"""
from __future__ import annotations

import functools
import re

from ._device_type import DEVICE as _DEVICE

_BIND = f"backplane_{_DEVICE}_aoti_bind"  # the model library's entry for the runner (aoti_runner.cpp)
_NS = f"backplane_{_DEVICE}_aoti"
BIND_VERSION = 1  # the launcher's signature below; aoti_runner.cpp passes the same


class NpuCppWrapperCodegen:
    """Stands for the C++ wrapper code generator until Inductor asks for one."""

    supports_caching = False  # AOTInductor compiles are never served from the FX graph cache

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return _codegen_class()()


# C++ emitted once per package, after torch's AOTI headers. The launcher returns null or
# the error message of a launch that was refused (a tensor not on one npu device...).
_PRELUDE = f"""
#include <functional>
#include <initializer_list>
#include <mutex>
#include <vector>
// {_DEVICE}: generated kernels run as device work, queued on the current stream through
// the plugin's launcher, which the plugin's AOTInductor runner binds after loading this library.
namespace {_NS} {{
using Entry = void (*)(void* const* tensors, const int64_t* ints, const double* floats);
using Launch = const char* (*)(Entry entry, const char* name, const AtenTensorHandle* tensors, int64_t n_tensors,
                               const int64_t* ints, int64_t n_ints, const double* floats, int64_t n_floats);
inline Launch& launcher() {{
  static Launch fn = nullptr;
  return fn;
}}
inline void launch(Entry entry, const char* name, std::initializer_list<AtenTensorHandle> tensors,
                   std::initializer_list<int64_t> ints, std::initializer_list<double> floats) {{
  Launch fn = launcher();
  AOTI_RUNTIME_CHECK(fn != nullptr, std::string("{_DEVICE} package: kernel ") + name +
                     " has no launcher; load the package through the {_DEVICE} plugin's AOTInductor runner "
                     "(backplane.load_package or backplane run --backends {_DEVICE})");
  if (const char* error = fn(entry, name, tensors.begin(), static_cast<int64_t>(tensors.size()), ints.begin(),
                             static_cast<int64_t>(ints.size()), floats.begin(), static_cast<int64_t>(floats.size())))
    throw std::runtime_error(error);
}}
// "{_DEVICE}:N" -> N. The runner always names the index (the current device when the
// loader was given none).
inline int32_t device_index(const std::string& device_str) {{
  const std::string prefix = "{_DEVICE}:";
  AOTI_RUNTIME_CHECK(device_str.rfind(prefix, 0) == 0 && device_str.size() > prefix.size() &&
                         device_str.find_first_not_of("0123456789", prefix.size()) == std::string::npos,
                     "{_DEVICE} package: expected the device as {_DEVICE}:N, found '" + device_str + "'");
  return static_cast<int32_t>(std::stoi(device_str.substr(prefix.size())));
}}

// What each model's constructor leaves for the runner's bind: moving the model onto the
// device once the container has loaded its constants (see the constructor).
inline std::vector<std::function<void()>>& pending_moves() {{
  static std::vector<std::function<void()>> moves;
  return moves;
}}
inline std::mutex& pending_mutex() {{
  static std::mutex mutex;
  return mutex;
}}
inline void on_loaded(std::function<void()> move) {{
  std::lock_guard<std::mutex> lock(pending_mutex());
  pending_moves().push_back(std::move(move));
}}
}}  // namespace {_NS}

// Called by the runner once the container (and so every model) exists: binds the launcher
// and moves the models onto the device. 0, or 1 for a runner of another version.
extern "C" __attribute__((visibility("default"))) int {_BIND}(int version, void* launch) {{
  if (version != {BIND_VERSION}) return 1;
  {_NS}::launcher() = reinterpret_cast<{_NS}::Launch>(launch);
  std::lock_guard<std::mutex> lock({_NS}::pending_mutex());
  for (auto& move : {_NS}::pending_moves()) move();
  {_NS}::pending_moves().clear();
  return 0;
}}
"""

def kernel_launch(kernel_name: str, call_args: list, arg_types: list) -> str:
    """The C++ statement that queues `kernel_name(call_args)` on the current stream: the
    trampoline is a captureless lambda (a plain function pointer), and the tensors are
    handles the launcher keeps alive until the kernel has run."""
    from ._host_kernels import _argument  # the Python wrapper's trampolines unpack the same way

    counts = {"t": 0, "i": 0, "f": 0}
    groups: dict[str, list[str]] = {"t": [], "i": [], "f": []}
    exprs = []
    for arg, argtype in zip(call_args, arg_types):
        kind, expr = _argument(counts, str(argtype))
        exprs.append(expr)
        groups[kind].append(str(arg))
    entry = (f"+[](void* const* t, const int64_t* i, const double* f) {{ (void)t; (void)i; (void)f; "
             f"{kernel_name}({', '.join(exprs)}); }}")
    lists = ", ".join("{" + ", ".join(groups[k]) + "}" for k in ("t", "i", "f"))
    return f'{_NS}::launch({entry}, "{kernel_name}", {lists});'


@functools.cache
def _shim_ops() -> dict:
    """Shim name suffix ("mm_out", "convolution", "foo_v2") -> (op name, version info)
    for every aten op AOTInductor calls through a C shim (torchgen's list)."""
    from torchgen.aoti.fallback_ops import inductor_fallback_ops

    out = {}
    for key, info in inductor_fallback_ops.items():
        _, name, overload = key.split(".")
        base = name if overload == "default" else f"{name}_{overload}"  # OperatorName.unambiguous_name
        out[base] = (key, info)
        for version in info:
            if version.startswith("v") and version[1:].isdigit():
                out[f"{base}_{version}"] = (key, info)
    return out


def dispatcher_shim(shim_fn: str) -> tuple[str, str]:
    """(header to include, C++ definition) of the C shim `shim_fn` (aoti_torch_<device>_<op>)
    as a call through the dispatcher, as torchgen writes torch's aoti_torch_aten_* shims.
    The op's schema comes from the dispatcher (torchgen's native_functions.yaml reader
    needs PyYAML). Limit: an op with a method variant only is called as a function.
    Raises NotImplementedError for an op torch has no shim for."""
    import torch
    from torchgen.gen_aoti_c_shim import gen_declaration_and_definition, gen_static_dispatch_backend_call
    from torchgen.model import Location, NativeFunction

    suffix = shim_fn.removeprefix(f"aoti_torch_{_DEVICE}_")
    found = _shim_ops().get(suffix)
    if found is None:
        raise NotImplementedError(
            f"backplane {_DEVICE}: the package calls {shim_fn}, but aten has no C shim for {suffix!r} "
            "(torchgen/aoti/fallback_ops.py); expected an op Inductor can call through a shim"
        )
    key, info = found
    _, name, overload = key.split(".")
    op = getattr(getattr(torch.ops.aten, name), overload)
    tags = [str(tag).removeprefix("Tag.") for tag in op.tags]
    f, _ = NativeFunction.from_yaml({"func": str(op._schema).removeprefix("aten::"), "tags": tags},
                                    Location(key, 0), valid_tags=set(tags))
    _, definition = gen_declaration_and_definition(f.func, _DEVICE, gen_static_dispatch_backend_call(f, None), info)
    return f"#include <ATen/ops/{f.root_name}.h>", definition


_CTOR_BASE = re.compile(r"(: AOTInductorModelBase\([^)]*?)\bdevice_str,")
_CONSTANT_DEVICE = re.compile(r"constants_info_\[(\d+)\]\.device_type = cached_torch_device_type_privateuse1;")


def _retarget_constructor(text: str) -> str:
    """The generated model constructor, made to load as a cpu model and move to the
    device when the runner binds it. torch's runtime parses the device with a pattern
    of cpu|cuda|xpu|mps (parse_device_str, aoti_runtime/model_base.h), and its container
    loads the constants with malloc and memcpy for any device but CUDA, XPU and MPS
    (load_constants): as device tensors they would be host addresses labelled npu.
    Loaded as cpu tensors they are what they are; the runner copies them onto the
    device and puts the copies in place. Raises if torch's constructor no longer has the
    expected form."""
    base = _CTOR_BASE.search(text)
    body = text.find(") {", base.end()) if base else -1
    if base is None or body < 0:
        raise RuntimeError(
            f"backplane {_DEVICE}: torch's AOTInductor model constructor has changed; expected "
            "': AOTInductorModelBase(..., device_str, ...) {' in the generated code"
        )
    on_device = [int(i) for i in _CONSTANT_DEVICE.findall(text)]
    line_end = text.index("\n", body) + 1
    move = (
        "    // Loads as a cpu model (see backplane_npu/compile/_aoti.py's _retarget_constructor); the runner's bind moves it.\n"
        f"    {_NS}::on_loaded([this, index = {_NS}::device_index(device_str)] {{\n"
        "      device_type_ = aoti_torch_device_type_privateuse1();\n"
        "      device_idx_ = index;\n"
        + "".join(f"      constants_info_[{i}].device_type = device_type_;\n" for i in on_device)
        + "    });\n"
    )
    text = _CONSTANT_DEVICE.sub(r"constants_info_[\1].device_type = aoti_torch_device_type_cpu();", text)
    text = text[:line_end] + move + text[line_end:]
    return text[: base.start()] + base.group(1) + '"cpu",' + text[base.end():]


def _headers_as_cpu() -> None:
    """Inductor precompiles the header a package's first include names, by device:
    aoti_include/<device>.h, which torch has for cpu, cuda, xpu and mps only
    (codecache._get_cpp_wrapper_header). This device's wrapper and kernels begin with the
    cpu headers, so their precompiled forms serve it; for other devices nothing changes."""
    from torch._inductor import codecache

    for name in ("_get_cpp_wrapper_header", "_get_cpp_prefix_header"):
        original = getattr(codecache, name)

        def as_cpu(device, *args, _original=original, **kwargs):
            return _original("cpu" if device.split(":", 1)[0] == _DEVICE else device, *args, **kwargs)

        setattr(codecache, name, functools.wraps(original)(as_cpu))


@functools.cache
def _codegen_class():
    _headers_as_cpu()
    from torch._inductor.codegen.common import get_device_op_overrides
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.utils import IndentedBuffer
    from torch._inductor.virtualized import V

    class Codegen(CppWrapperCpu):
        def __init__(self):
            self.device = _DEVICE
            super().__init__()
            self.needs_vec_isa = True  # the kernels are Inductor's vectorized CPU code
            self.device_codegen = get_device_op_overrides("cpu")  # ...and C++ functions, as on cpu
            self._shims: dict[str, tuple[str, str]] = {}

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            return Codegen()

        def write_header(self):
            if not V.graph.aot_mode:
                raise NotImplementedError(
                    f"backplane {_DEVICE}: the C++ wrapper serves AOTInductor packages only; torch.compile on "
                    f"{_DEVICE} uses the Python wrapper (leave cpp_wrapper off)"
                )
            super().write_header()

        def add_device_include(self, device: str) -> None:
            if device != _DEVICE:
                return super().add_device_include(device)
            if device in self.included_devices:
                return None
            super().add_device_include("cpu")  # the kernels are CPU code, over host memory
            self.included_devices.add(device)
            self.header.splice(_PRELUDE)
            return None

        def codegen_device(self, device):
            if device.type != _DEVICE:
                return super().codegen_device(device)
            self.used_cached_devices.add("privateuse1")
            return f"cached_torch_device_type_privateuse1, {device.index or 0}"

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, arg_types=None,
                                         **kwargs):
            device = device or V.graph.get_current_device_or_throw()
            if device.type != _DEVICE or triton:
                return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton,
                                                            arg_types=arg_types, **kwargs)
            if arg_types is None or len(arg_types) != len(call_args):
                raise AssertionError(f"{kernel_name}: call_args {call_args} do not match arg_types {arg_types}")
            self.writeline(kernel_launch(kernel_name, call_args, arg_types))
            return None

        def generate_c_shim_extern_kernel_call(self, kernel, args, device, **kwargs):
            if device == _DEVICE:
                self._define_shim(self.get_c_shim_func_name(kernel, device))
            return super().generate_c_shim_extern_kernel_call(kernel, args, device, **kwargs)

        def _define_shim(self, shim_fn: str) -> None:
            """Writes the shim's definition into the header (assembled after every line is
            generated, and ahead of run_impl, which calls it)."""
            if shim_fn in self._shims:
                return
            if not self._shims:
                self.header.splice("#include <torch/csrc/inductor/aoti_torch/utils.h>")
            include, definition = self._shims[shim_fn] = dispatcher_shim(shim_fn)
            self.header.splice(include)
            self.header.writeline(f"// {shim_fn}: through the dispatcher (torchgen, as torch's aoti_torch_aten_*)")
            self.header.writeline("namespace torch::aot_inductor {")
            self.header.splice(definition)
            self.header.writeline("}  // namespace torch::aot_inductor")

        def codegen_model_constructor(self):
            for name in V.graph.constants:
                value = V.graph.get_original_value_of_constant(name)
                if value.device.type != _DEVICE:
                    raise NotImplementedError(
                        f"backplane {_DEVICE}: constant {name} is on {value.device}; a {_DEVICE} package keeps "
                        f"every constant on {_DEVICE} (move it there before exporting)"
                    )
            real, self.prefix = self.prefix, IndentedBuffer()
            try:
                super().codegen_model_constructor()
                text = self.prefix.getvalue()
            finally:
                self.prefix = real
            self.prefix.splice(_retarget_constructor(text))


    return Codegen
