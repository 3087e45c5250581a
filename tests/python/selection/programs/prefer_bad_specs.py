"""Bad preferences raise, naming the spec, and change nothing.
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane

import pytest
def refused(match, *args, error=ValueError):
    with pytest.raises(error, match=match) as caught:
        backplane.prefer(*args)
    assert "internal error" not in str(caught.value), caught.value
    assert backplane.preferences() == "identity_conv:cpu_alt", "a refused preference changes nothing"
backplane.prefer("identity_conv", "cpu_alt")
refused(r"preference 'nosuch:cpu': no op 'nosuch' in the registry", "nosuch", "cpu")
refused(r"preference 'identity_conv:a,b': 'a,b' is not a plugin name", "identity_conv", "a,b")
refused(r"preference 'identity_conv:': '' is not a plugin name", "identity_conv", "")
refused(r"preference 'identity_conv:core': 'core' is not a plugin name", "identity_conv", "core")
refused(r"preference 'acme::a;b:cpu': 'acme::a;b' is not an op name", "acme::a;b", "cpu")
refused(r"the op name holds a NUL", "identity_conv\x00x", "cpu")
refused(r"takes strings", 3, "cpu", error=TypeError)
refused(r"takes strings", "identity_conv", "cpu", None, error=TypeError)
