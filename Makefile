# attngraph: `make demo` and `make test` do everything, starting from a fresh clone.
# They create a virtual environment in $(VENV), install attngraph into it (editable, with the
# dev extras), install graphviz's `dot` when possible (and, for `make test`, headless Chromium for the
# viewer's tests), and pin Numba's threading layer.
# Non-interactive (CI=true, no stdin) works: nothing here prompts.

PYTHON ?= python3
VENV   ?= .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ARGS   ?=

.DEFAULT_GOAL := test
.PHONY: venv dot browser threads demo test clean

IS_ROOT  := $(filter 0,$(shell id -u))
HAVE_APT := $(shell command -v apt-get 2>/dev/null)
CAN_APT  := $(and $(IS_ROOT),$(HAVE_APT))
APT_GET  := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600

# --- Numba threading layer ---------------------------------------------------------------------
# `omp` (GNU OpenMP) is the fastest layer here: ~1.5 us per parallel region, against ~2.3 us for
# `tbb` and ~70 us for `workqueue` (which also aborts the process when two Python threads run
# parallel code at once). The numba wheel does NOT bundle libgomp: its omp layer links the
# system's libgomp.so.1 (Debian/Ubuntu package libgomp1; it comes with gcc, slim images lack it).
# Where it is missing, numba silently falls back to workqueue, so the layer is always set
# explicitly here and tests/test_setup.py asserts that it is the one really in use.
# Default: omp when libgomp.so.1 is installed, or when we are root with apt-get (then `threads`
# installs libgomp1). Otherwise tbb: pip's `tbb` wheel is installed into the venv; numba's
# tbbpool has no rpath to find libtbb.so.12 there, so LD_LIBRARY_PATH gets $(VENV)/lib (for the
# recipes below; export it yourself to run $(VENV)/bin/attngraph with tbb outside make).
# Override with: make test NUMBA_THREADING_LAYER=omp|tbb|workqueue
HAVE_GOMP := $(shell $(PYTHON) -c "import ctypes.util; print(ctypes.util.find_library('gomp') or '')" 2>/dev/null)
ifndef NUMBA_THREADING_LAYER
  NUMBA_THREADING_LAYER := $(if $(HAVE_GOMP)$(CAN_APT),omp,tbb)
endif
export NUMBA_THREADING_LAYER
ifeq ($(NUMBA_THREADING_LAYER),tbb)
  export LD_LIBRARY_PATH := $(abspath $(VENV))/lib$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
endif

# --- virtual environment (re-installed only when pyproject.toml is newer than the stamp) ------
venv: $(STAMP)

$(STAMP): pyproject.toml
	@if [ ! -x $(VPY) ]; then \
	  echo "Creating $(VENV) with $(PYTHON)"; \
	  $(PYTHON) -m venv $(VENV) || { \
	    if [ -n "$(CAN_APT)" ]; then \
	      echo "venv/ensurepip missing: installing python3-venv"; \
	      $(APT_GET) update && $(APT_GET) install python3-venv && $(PYTHON) -m venv $(VENV); \
	    else false; fi; }; \
	fi
	$(VPY) -m pip install -q --upgrade pip
	@# editable_mode=compat puts this folder on sys.path (a .pth): a folder named attngraph on sys.path before it (a
	@# script run from the clone's parent) cannot shadow the package, as it does the default mode's import hook
	$(VPY) -m pip install -e ".[dev,onnx,hf,mpi]" --config-settings editable_mode=compat   # onnx, hf, mpi: ONNX export, Hugging Face import, MPI, their tests
	@touch $@

# --- graphviz's `dot`: needed to lay out SVG/PNG/PDF; .dot text is written without it ---------
dot:
	@if command -v dot >/dev/null 2>&1; then :; \
	elif [ -n "$(CAN_APT)" ]; then \
	  echo "Installing graphviz (the system 'dot') with apt-get"; \
	  { $(APT_GET) update && $(APT_GET) install graphviz; } || echo "warning: apt-get could not install graphviz; SVG rendering will fail"; \
	else \
	  printf '%s\n' \
	    "warning: graphviz's 'dot' is not installed; .dot files are still written, but SVG rendering needs it." \
	    "Install it with one of:" \
	    "  Debian/Ubuntu:  sudo apt-get install graphviz" \
	    "  macOS:          brew install graphviz" \
	    "  conda:          conda install -c conda-forge graphviz" \
	    "  Windows:        choco install graphviz"; \
	fi

# --- headless Chromium: the viewer's tests drive its pages as a person would (they skip without it) --------
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	    || command -v google-chrome >/dev/null 2>&1; then :; \
	elif [ -n "$(CAN_APT)" ]; then \
	  echo "Installing Chromium with apt-get (headless, for the viewer's tests)"; \
	  { $(APT_GET) update && $(APT_GET) install chromium; } || echo "warning: apt-get could not install chromium; the viewer's browser tests will skip"; \
	else \
	  echo "note: Chromium is not installed; the viewer's browser tests will skip (Debian/Ubuntu: sudo apt-get install chromium)"; \
	fi

# --- the threading layer's native library (see the comment at the top) ------------------------
ifeq ($(NUMBA_THREADING_LAYER),tbb)
threads: $(VENV)/lib/libtbb.so.12
$(VENV)/lib/libtbb.so.12: | $(STAMP)
	$(VPY) -m pip install "tbb>=2021.6"
else ifeq ($(NUMBA_THREADING_LAYER),omp)
threads: venv
ifeq ($(HAVE_GOMP),)
	@if [ -n "$(CAN_APT)" ]; then \
	  echo "Installing GNU OpenMP (libgomp1) for numba's omp threading layer"; \
	  $(APT_GET) update && $(APT_GET) install libgomp1; \
	else \
	  echo "error: NUMBA_THREADING_LAYER=omp needs GNU OpenMP (libgomp.so.1), which is not installed."; \
	  echo "Install it (sudo apt-get install libgomp1), or use TBB: make $(MAKECMDGOALS) NUMBA_THREADING_LAYER=tbb"; \
	  exit 1; \
	fi
endif
else
threads: venv
endif

# --- numba's kernels, compiled into its on-disk cache (ops/cpu/__pycache__) as a build step ------
# Compiled lazily, they made the copy demo's first training step take 15-18 s on a fresh clone; from the
# cache it takes ~1 s (3 s from the start of the process). `attngraph warmup` (~30 s for float32) compiles
# what the demos (float32) and the tests (float64 too) use, with a progress bar; it runs again when a
# kernel's source changes (numba then recompiles it).
KERNELS := $(wildcard ops/cpu/*.py)

$(VENV)/.warm-%: $(STAMP) $(KERNELS) | threads
	$(VENV)/bin/attngraph warmup --dtype $*
	@touch $@

# --- the two commands of the README ------------------------------------------------------------
demo: venv dot threads $(VENV)/.warm-float32
	$(VENV)/bin/attngraph demo

test: venv dot browser threads $(VENV)/.warm-float32 $(VENV)/.warm-float64
	$(VPY) -m pytest $(ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis
	find . \( -path ./$(VENV) -o -path ./.git \) -prune -o -type d -name __pycache__ -exec rm -rf {} +
