"""A progress line for slow steps (AOTInductor compiles take a minute or more)."""
from __future__ import annotations

import sys
import threading
import time


class Ticker:
    """`with Ticker("compiling"):` prints the elapsed time every `every` seconds, then the total."""

    def __init__(self, what: str, every: float = 10.0):
        self.what, self.every = what, every
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.wait(self.every):
            print(f"  ... {self.what}: {time.monotonic() - self.start:.0f} s", file=sys.stderr, flush=True)

    def __enter__(self):
        self.start = time.monotonic()
        print(f"  {self.what} ...", file=sys.stderr, flush=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.seconds = time.monotonic() - self.start
        state = "failed" if exc[0] else "done"
        print(f"  {self.what}: {state} in {self.seconds:.1f} s", file=sys.stderr, flush=True)
        return False
