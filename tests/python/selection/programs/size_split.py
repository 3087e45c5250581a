"""What the selection-file programs start with (test_selection_file.py): cpu loaded, with
`ident` (identity_conv), tensors `small` (100 elements) and `large` (101), served(x): the
plugin whose identity_conv answered (the fixture cpu_alt's is -x), and FIXTURES, cpu_alt's
folder, from sys.argv[1]. A program here imports it (`from size_split import ...`): a
program's own folder is the first entry of its sys.path."""
import sys

import warnings, torch, backplane
warnings.simplefilter("ignore")
backplane.load("cpu")
ident = torch.ops.backplane.identity_conv
small, large = torch.randn(100), torch.randn(101)
def served(x):
    y = ident(x)
    return "cpu_alt" if torch.equal(y, -x) else "cpu" if torch.equal(y, x) else "wrong"
FIXTURES = sys.argv[1]
