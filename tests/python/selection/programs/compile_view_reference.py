"""A reference that is a view of its argument (crop's narrow) traced (`inductor`): the
compiled call returns a tensor of its own, as the op does eagerly, so a write into the
result leaves the argument as it was (graph_pass._own_memory); and two such calls of the
same arguments return two tensors, not one merged (splice.share_common_terms), as do two
calls of mul (`inductor` too), whose results the graph returns."""
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

a, b = torch.compile(lambda img: (crop(img, box), crop(img, box)), dynamic=False, fullgraph=True)(img)
assert not torch._C._is_alias_of(a, b) and not torch._C._is_alias_of(a, img), (a.data_ptr(), b.data_ptr())
a.fill_(0)
torch.testing.assert_close(b, img[:, 1:5, 2:7], rtol=0, atol=0)

x, y = torch.randn(5, 7), torch.randn(5, 7)
mul = torch.ops.backplane.mul
p, q = torch.compile(lambda x, y: (mul(x, y), mul(x, y)), dynamic=False, fullgraph=True)(x, y)
assert {r["choice"] for r in backplane.compile.resolutions() if r["op"] == "mul"} == {"inductor"}
assert not torch._C._is_alias_of(p, q), (p.data_ptr(), q.data_ptr())
print("ok")
