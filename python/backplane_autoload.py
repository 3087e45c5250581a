"""The `torch.backends` entry point of the backplane package (see pyproject.toml).

It lives outside the `backplane` package on purpose. torch imports the entry point's
module and calls it while `import torch` runs, and turns any exception into "Failed
to load the backend extension", so one broken setting would break `import torch` for
every program in the environment. Importing `backplane` can fail by design (no
libraries found, BACKPLANE_BACKENDS naming a missing plugin), so the import happens
here, inside one try: a failure becomes one warning naming the cause and the fix, and
torch imports without Backplane. `import backplane` itself still raises the error.

A plugin is opened in a child process before it is opened here (backplane_plugins.probe_first):
one that exits, crashes, hangs or throws while opening is left out, with one warning.
"""
from __future__ import annotations

import os
import sys
import warnings


def autoload() -> None:
    importing = sys.modules.get("backplane")
    if importing is not None and not getattr(importing, "_initialized", False):
        # `import backplane` came first and imported torch, which calls this entry point
        # while backplane is half-initialized: marked, so that backplane finishes the
        # autoload itself at the end of its import. The dependency goes one way: this
        # module knows backplane; backplane never imports this one.
        importing._autoload_deferred = True
        return
    try:
        import backplane

        backplane._autoload()
    except Exception as err:  # noqa: BLE001 -- anything raised here would fail `import torch`
        warnings.warn(_message(err), RuntimeWarning, stacklevel=2)


def _message(err: Exception) -> str:
    selected = os.environ.get("BACKPLANE_BACKENDS")
    backend_error = type(err).__name__ in ("BackendError", "BackendNameError")
    if selected is not None and backend_error:
        fix = f"correct or unset BACKPLANE_BACKENDS (now {selected!r})"
    else:
        fix = 'run `python -c "import backplane"` for the full traceback'
    return (
        f"backplane autoload failed, so torch is imported without Backplane: {type(err).__name__}: {err}. "
        f"To fix: {fix}; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns autoloading off."
    )
