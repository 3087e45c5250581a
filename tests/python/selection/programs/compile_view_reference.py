"""A reference that is a view of its argument (crop's narrow) traced (`inductor`): the
compiled call returns a tensor of its own, as the op does eagerly, so a write into the
result leaves the argument as it was (graph_pass._own_memory)."""
from compile_selection import backplane, calls_plugin, code_of, torch

img = torch.randn(3, 8, 8)
box = [1, 2, 4, 5]
crop = torch.ops.backplane.crop
out, code = code_of(torch.compile(lambda img: crop(img, box), dynamic=False, fullgraph=True), img)
assert not calls_plugin(code, "crop"), code
assert {r["choice"] for r in backplane.compile.resolutions() if r["op"] == "crop"} == {"inductor"}
torch.testing.assert_close(out, img[:, 1:5, 2:7], rtol=0, atol=0)
assert not torch._C._is_alias_of(out, img) and out.is_contiguous(), (out.stride(), img.stride())
before = img.clone()
out.fill_(0)
torch.testing.assert_close(img, before, rtol=0, atol=0)
print("ok")
