"""What the vendor-op programs (test_vendor_ops.py) start with: cpu loaded, then the fixture
plugin acme from the folder sys.argv[1]; `acme` is its backend, `gelu` acme::fused_gelu.
A program here imports it (`from acme_prelude import ...`): a program's own folder is the
first entry of its sys.path."""
import sys

import torch, backplane

backplane.load("cpu")
acme = backplane.load("acme", path=sys.argv[1])[0]
gelu = backplane.torch_op("acme::fused_gelu")
