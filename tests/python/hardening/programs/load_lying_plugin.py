"""Loads cpu, then the plugin `liar` from the folder argv[1], whose manifest lies about
what it registers; prints the BackendError, and fails if the load succeeded."""
import sys

import backplane

backplane.load("cpu")
try:
    backplane.load("liar", path=sys.argv[1])
    raise SystemExit("a plugin whose manifest lies was loaded")
except backplane.BackendError as e:
    print(e)
