"""python -m backplane.bench: the same as `python -m backplane bench`."""
import sys

from . import main

sys.exit(main())
