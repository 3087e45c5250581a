"""argv: ACME_DIR CLASH_DIR CLASH_FRAGMENT ACME_FRAGMENT: acme_clash, redefining
acme::fused_gelu, is refused naming both fragments' lines; acme's op is untouched."""
import sys

from acme_prelude import backplane, gelu, torch

clash_dir, clash, fragment = sys.argv[2:5]
try:
    backplane.load("acme_clash", path=clash_dir)
    raise SystemExit("the clash was accepted")
except backplane.BackendError as e:
    text = str(e)
assert clash + ":5:5: redefines acme::fused_gelu, which plugin 'acme' already defined at " in text, text
assert fragment + ":5:5" in text, text
# acme's op is untouched.
x = torch.randn(8)
torch.testing.assert_close(gelu(x), torch.nn.functional.gelu(x))
