"""Copies of @triton.jit templates that call one op's function by its own name.

Why: a template that took the op's function as a `tl.constexpr` argument (FN) runs eagerly,
but Inductor writes a traced kernel's constexpr values into the generated code with repr(),
and a JITFunction's repr is not Python ("JITFunction(module:name)"): the compiled module
failed to import with a SyntaxError (seen on an H200, torch 2.11, Triton 3.6). So each op
gets its own copy of the templates, whose source calls the function by name; Inductor then
copies that function's source beside the kernel, as for any @triton.jit helper.

How: each template's source has its call `FN(` renamed to the function's name, is compiled
into a namespace holding the template module's globals plus the function, and is
registered with linecache under a name of its own, so inspect.getsource (which Triton,
its interpreter and Inductor read) finds it. Limits: the templates must name the function
FN and not take it as a parameter; the copies live until the process ends (one set an op).
"""
import inspect
import linecache
import re
import textwrap

import triton


def _python_function(kernel):
    """The plain function under a @triton.jit (JITFunction.fn; the interpreter's too)."""
    return getattr(kernel, "fn", kernel)


def bind_function(templates, fn) -> dict:
    """{template name: copy of it calling fn}, the templates compiled together (a template
    calling another of the list calls its copy)."""
    target = _python_function(fn)
    first = _python_function(templates[0])
    namespace = dict(first.__globals__)
    namespace[target.__name__] = fn
    sources = []
    for template in templates:
        source = textwrap.dedent(inspect.getsource(_python_function(template)))
        sources.append(re.sub(r"\bFN\(", f"{target.__name__}(", source))
    text = "\n\n".join(sources)
    names = [_python_function(t).__name__ for t in templates]
    filename = f"<{first.__module__}.{'+'.join(names)} bound to {target.__module__}.{target.__name__}>"
    # mtime None: linecache.checkcache keeps the entry though no such file exists.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), namespace)
    bound = {name: namespace[name] for name in names}
    if not all(isinstance(k, (triton.runtime.jit.JITFunction, type(templates[0]))) for k in bound.values()):
        raise TypeError(f"bind_function: the templates {names} must be @triton.jit functions")
    return bound
