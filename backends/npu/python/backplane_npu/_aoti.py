"""AOTInductor's C++ wrapper for npu (not yet).

Contract with _inductor.py: NpuCppWrapperCodegen, when present, is registered as the
device's cpp wrapper code generator at the moment Inductor's codegen.common module
finishes importing, so this module must import nothing of Inductor's code generation
at module level (a stand-in with a static `create`, like _inductor._LazyWrapper).
"""
