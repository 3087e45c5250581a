# Two commands for a newcomer: `make demo` and `make test`. Both set up what is
# missing (Debian packages, a Python with torch), build, then run.
#   BUILD=dir            build directory (default build)
#   TORCH_PYTHON=path    use this Python's torch instead of .venv / python3
#   BACKPLANE_CUDA=ON    require the CUDA plugin (AUTO: build it when nvcc and a CUDA torch are there)
#   CMAKE_ARGS=...       more CMake options
#   JOBS=N               compile jobs at once (default: one per core; JOBS=1 on a small machine)
BUILD ?= build
BACKPLANE_CUDA ?= AUTO
JOBS ?=
GENERATOR := $(if $(shell command -v ninja),-G Ninja,)

.PHONY: setup build test demo bench clean

setup:
	@scripts/setup.sh $(BUILD)

# The compiler setup chose (one that links libstdc++ dynamically), on the first configure;
# nvcc's host compiler likewise (CUDAHOSTCXX, read by cmake/BackplaneCuda.cmake).
build: setup
	CUDAHOSTCXX=$$(cat $(BUILD)/.cudahostcxx) cmake -S . -B $(BUILD) $(GENERATOR) -DBACKPLANE_PYTHON=$$(cat $(BUILD)/.python) \
	  $$([ -f $(BUILD)/CMakeCache.txt ] || echo -DCMAKE_CXX_COMPILER=$$(cat $(BUILD)/.cxx)) \
	  -DBACKPLANE_CUDA=$(BACKPLANE_CUDA) $(CMAKE_ARGS)
	cmake --build $(BUILD) --parallel $(JOBS)

test: build
	scripts/test.sh $(BUILD)

demo: build
	scripts/demo.sh $(BUILD)

# Every op on the default backends (BACKPLANE_BACKENDS, else cpu and a present GPU): table, JSON, plot.
bench: build
	scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
