# kernelsearch: `make run` (install if needed, then a real search on the embedded default) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NAME   := demo-$(shell date +%Y%m%d-%H%M%S)
# Test processes (pytest-xdist). A test keeps about one core busy on average (much of it waits on subprocesses,
# timeouts and sleeps), so two on 2 cores take half the time: make test 7m27s -> 4m17s, make test-slow 33m -> 16m on
# the 2-core machine. Files stay whole on one process (--dist loadfile): their module fixtures are evaluated once.
# JOBS=0 runs in this process, one test at a time.
JOBS   ?= 2
XDIST  := $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)

.PHONY: install run test test-slow test-all lint clean

install: $(STAMP)

# torch first, pinned: 2.13.0 is the CPU build on local disk (a bare `torch` would pull a CUDA build of GBs).
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	# nvcc for the sm_90a compile of CUDA C++ candidates on machines without a GPU (judge/cuda_check.py): the
	# machine's, else NVIDIA's nvidia-cuda-nvcc wheels (nvidia/cu13/bin/nvcc in the venv)
	command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || \
		$(BIN)/python -m pip install -q nvidia-cuda-nvcc nvidia-cuda-cccl
	touch $(STAMP)

run: install
	$(BIN)/kernelsearch run configs/demo.yaml --name $(NAME)
	$(BIN)/kernelsearch tree $(NAME) --db runs/demo.db

test: install
	$(BIN)/python -m pytest -q -m "not slow" $(XDIST) --durations=25

test-slow: install
	$(BIN)/python -m pytest -q -m slow $(XDIST) --durations=40

test-all: install
	$(BIN)/python -m pytest -q $(XDIST)

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs build *.egg-info
