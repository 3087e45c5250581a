"""`backplane new-backend NAME --dispatch-key CPU|CUDA --stable-abi [--torch-target X.Y]`:
the files it writes (mul as the worked example, the other ops stubbed over stable types,
ops whose arguments the stable path cannot carry explained), the torch target in one place,
and its refusals. On a GPU the CUDA scaffold is built and checked too; the CPU scaffold is
built against an older torch's headers by the SDK journey (scripts/sdk_journey.sh, step 8)."""
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

import backplane

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
HERE = backplane.info()["torch"]  # this Backplane's torch, major.minor


def cli(*args):
    return subprocess.run([str(BACKPLANE), "new-backend", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,message", [
    (["--dispatch-key", "PrivateUse1", "--stable-abi"],
     "--stable-abi serves CPU or CUDA kernels; a PrivateUse1 device's runtime (guard, allocator, hooks) needs the "
     "full ABI"),
    (["--dispatch-key", "CPU", "--torch-target", "2.13"], "--torch-target needs --stable-abi"),
    (["--dispatch-key", "CPU", "--stable-abi", "--torch-target", "2"], "--torch-target '2': expected major.minor"),
    (["--dispatch-key", "CPU", "--stable-abi", "--torch-target", "2.x"], "--torch-target '2.x': expected major.minor"),
    (["--dispatch-key", "CPU", "--stable-abi", "--torch-target", "99.0"],
     f"--torch-target 99.0 is later than this Backplane's torch {HERE}: the plugin would not load under it"),
])
def test_refusals_name_what_was_expected(tmp_path, args, message):
    r = cli("vega", *args, "--dir", tmp_path / "out")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"backplane new-backend: {message}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_cpu_scaffold_writes_mul_and_stable_stubs(tmp_path):
    r = cli("vega", "--dispatch-key", "CPU", "--stable-abi", "--torch-target", "2.11", "--dir", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mul implemented as the worked example" in r.stdout and "torch 2.11 and later" in r.stdout
    cmake = (tmp_path / "CMakeLists.txt").read_text()
    assert "DISPATCH_KEY CPU STABLE_ABI TORCH_TARGET ${TORCH_TARGET}" in cmake
    project = (tmp_path / "pyproject.toml").read_text()
    assert 'torch-target = "2.11"' in project and 'abi = "stable"' in project and 'provider = "backplane_wheel"' in project
    kernels = tmp_path / "kernels"
    ops = {op.name for op in backplane.ops() if op.namespace == "backplane"}
    assert {p.stem for p in kernels.iterdir()} == ops
    mul = (kernels / "mul.cpp").read_text()
    assert "\nBACKPLANE_STABLE_KERNEL(CPU, mul, vega::mul)" in mul and "ATen" not in mul.split("#include", 1)[1]
    scale = (kernels / "scale_.cpp").read_text()
    assert "void scale_(torch::stable::Tensor& x, double s)" in scale
    assert "// BACKPLANE_STABLE_WRITING_KERNEL(CPU, scale_, vega::scale_)" in scale
    rms = (kernels / "rms_norm_backward.cpp").read_text()
    assert ("void rms_norm_backward(torch::stable::Tensor& out0, torch::stable::Tensor& out1, "
            "const torch::stable::Tensor& grad, const torch::stable::Tensor& x, const torch::stable::Tensor& weight, "
            "double eps)") in rms
    add = (kernels / "add.cpp").read_text()
    assert ("void add(torch::stable::Tensor& out, const torch::stable::Tensor& a, const torch::stable::Tensor& b, "
            "const backplane::stable::Scalar& alpha)") in add
    assert "// BACKPLANE_STABLE_KERNEL(CPU, add, vega::add)" in add
    crop = (kernels / "crop.cpp").read_text()
    assert "void crop(torch::stable::Tensor& out, const torch::stable::Tensor& img, backplane::stable::IntList box)" in crop
    readme = (tmp_path / "README.md").read_text()
    assert "--stable-abi --torch-target 2.11" in readme and "torch 2.11 and every later release" in readme
    assert "`torch>=2.11`" in readme


def test_the_target_defaults_to_this_backplanes_torch(tmp_path):
    assert cli("vega", "--dispatch-key", "CPU", "--stable-abi", "--dir", tmp_path).returncode == 0
    assert f'torch-target = "{HERE}"' in (tmp_path / "pyproject.toml").read_text()


def test_a_full_abi_scaffold_asks_for_its_build_torch(tmp_path):
    assert cli("acme", "--dispatch-key", "CPU", "--dir", tmp_path).returncode == 0
    project = (tmp_path / "pyproject.toml").read_text()
    assert 'abi = "full"' in project and "torch-target" not in project
    assert "STABLE_ABI" not in (tmp_path / "CMakeLists.txt").read_text()


def test_a_cuda_scaffold_writes_a_cuda_mul(tmp_path):
    assert cli("vegagpu", "--dispatch-key", "CUDA", "--stable-abi", "--dir", tmp_path).returncode == 0
    mul = (tmp_path / "kernels" / "mul.cu").read_text()
    assert "backplane::stable::current_stream()" in mul and "\nBACKPLANE_STABLE_KERNEL(CUDA, mul, vegagpu::mul)" in mul
    assert not (tmp_path / "kernels" / "mul.cpp").exists()
    assert "DISPATCH_KEY CUDA STABLE_ABI" in (tmp_path / "CMakeLists.txt").read_text()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA scaffold's kernel runs on a GPU; none here")
def test_the_cuda_scaffold_builds_and_passes_check(tmp_path):
    build = BACKPLANE.parent.parent
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], check=True, capture_output=True)
    assert cli("vegagpu", "--dispatch-key", "CUDA", "--stable-abi", "--dir", tmp_path / "vegagpu").returncode == 0
    configure = ["cmake", "-S", str(tmp_path / "vegagpu"), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={prefix}",
                 f"-DBACKPLANE_PYTHON={(build / '.python').read_text().strip()}",
                 f"-DCMAKE_CXX_COMPILER={(build / '.cxx').read_text().strip()}", "-DCMAKE_CUDA_ARCHITECTURES=native"]
    host = build / ".cudahostcxx"
    env = {**os.environ, **({"CUDAHOSTCXX": host.read_text().strip()} if host.is_file() else {})}
    for step in (configure, ["cmake", "--build", str(tmp_path / "b"), "--parallel"]):
        done = subprocess.run(step, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = subprocess.run([str(prefix / "bin" / "backplane"), "check", "vegagpu", "--plugin-path",
                           str(tmp_path / "b" / "lib"), "--json"], capture_output=True, text=True, timeout=600)
    rows = {r["op"]: r["status"] for r in json.loads(done.stdout) if r.get("backend") == "vegagpu"}
    assert rows.pop("mul") == "passed", done.stdout
    assert set(rows.values()) == {"not implemented"}, rows
