"""argv: ACME_DIR OP: prints {sample name: its cases' outcomes, sorted} of backplane.check
for OP as JSON; the contract's and the entry's error cases left out."""
import sys

from acme_prelude import backplane

import collections, json
op = sys.argv[2]
found = collections.defaultdict(set)
for r in backplane.check("acme"):
    if r.op == op and "/" in r.case and r.case.split("/")[0] not in ("error", "gradient"):
        found[r.case.split("/")[0]].add(r.outcome)
print(json.dumps({k: sorted(v) for k, v in found.items()}))
