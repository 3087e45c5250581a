"""The plugin's kernel table: `@kernel("op")` records a launcher under its registry op name.

A launcher follows the C++ plugins' BACKPLANE_KERNEL convention: the core has checked
dtypes, devices and shapes and allocated the outputs; it is called as
launcher(out, *op_arguments), or launcher(out0, out1, *op_arguments) for ops returning two
tensors, writes the outputs on the current stream and returns nothing.
"""

_launchers = {}


def kernel(op_name):
    """Records the decorated launcher as the kernel of registry op `op_name`."""

    def record(launcher):
        if op_name in _launchers and _launchers[op_name] is not launcher:
            raise ValueError(f"backplane_triton: two launchers for op '{op_name}': "
                             f"{_launchers[op_name].__module__} and {launcher.__module__}")
        _launchers[op_name] = launcher
        return launcher

    return record


def recorded():
    """A copy of the table: op name -> launcher."""
    return dict(_launchers)
