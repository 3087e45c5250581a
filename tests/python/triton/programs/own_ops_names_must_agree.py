"""argv: PLUGINS_DIR: three triton plugins whose fragment defines an op the package and
manifest disagree on (test_triton_own_ops.py writes them): `unlisted` serves tlu::scale_add,
which its manifest does not list; `unserved` lists tlv::scale_add, which its package does not
serve; `bare` serves its own op under the bare name scale_add. Prints each BackendError as
JSON. A fresh process: each fragment is defined before the refusal, and ops stay defined."""
import json
import sys

import backplane

messages = {}
for name in ("unlisted", "unserved", "bare"):
    try:
        backplane.load(name, path=f"{sys.argv[1]}/{name}")
        messages[name] = ""
    except backplane.BackendError as e:
        messages[name] = str(e)
print(json.dumps(messages))
