# Sourced by the scripts that run Backplane's Python (test.sh, demo.sh): the environment
# those processes share. Needs $python (the interpreter setup chose) and $BUILD.

# Inductor trusts the CPU's vector-ISA flags instead of proving each with a compiled
# probe loaded in a fresh Python: each probe pays a torch import, which dominated a first
# torch.compile on the GPU machine. Some ISAs (AVX512 with bf16, VNNI, AMX) are still
# probed.
export TORCHINDUCTOR_VEC_ISA_OK=${TORCHINDUCTOR_VEC_ISA_OK:-1}

# Where Python writes no bytecode for torch (PYTHONDONTWRITEBYTECODE=1 on the GPU machine,
# or a read-only torch), every new process compiles torch's modules from source again:
# most of an AOTInductor compile there, and as much in each child process the
# tests start (an Inductor ISA probe, a package loaded in a child). These processes then
# keep their bytecode in the build folder, and only there: nothing is written beside
# torch's sources. Left alone where torch's bytecode is already there.
if [ -z "${PYTHONPYCACHEPREFIX:-}" ] && ! env -u PYTHONDONTWRITEBYTECODE "$python" -c '
import importlib.util as u, os, sys
spec = u.find_spec("torch")
sys.exit(0 if spec is None or os.path.exists(u.cache_from_source(spec.origin)) else 1)'; then
  export PYTHONPYCACHEPREFIX=$PWD/$BUILD/pycache
  echo "[python] no bytecode cached for torch${PYTHONDONTWRITEBYTECODE:+ (PYTHONDONTWRITEBYTECODE is set)}: these processes keep theirs in $PYTHONPYCACHEPREFIX"
  unset PYTHONDONTWRITEBYTECODE
fi
