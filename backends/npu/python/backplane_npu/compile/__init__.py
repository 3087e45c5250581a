"""torch.compile and AOTInductor on the device: _inductor registers the device with
Inductor and Dynamo (on_load), _wrapper_codegen and _host_kernels make and launch the
Python wrapper's kernels, _aoti writes and runs AOTInductor packages, _inductor_patches
adjusts the few answers of Inductor's that assume a C++ device is the CPU. Nothing here
imports Inductor until Inductor is imported (backplane.import_hooks)."""
