"""A bad preference is a ValueError naming it.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import backplane

import pytest
with pytest.raises(ValueError, match="preference 'nosuch:cpu': no op 'nosuch' in the registry"):
    backplane.prefer("nosuch", "cpu")
with pytest.raises(ValueError, match="'a,b' is not a plugin name"):
    backplane.prefer("identity_conv", "a,b")
