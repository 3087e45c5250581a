"""check() refuses an unknown op, naming the known ones.
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane

import pytest
for ops in ("nope", ["add", "nope"]):
    with pytest.raises(ValueError, match=r"^check: no op 'nope' in the registry or a loaded plugin's fragment; known: "
                       ) as caught:
        backplane.check("cpu", ops)
    known = set(str(caught.value).split("known: ")[1].split(", "))
    assert known == {op.name for op in backplane.ops()}, known
assert {r.op for r in backplane.check("cpu", "backplane::add")} == {"add"}
