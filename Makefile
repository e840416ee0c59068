# make demo: run examples/quickstart.py; make test: run the test suite (with the
# differential suite against Ray Data); make compat-table: regenerate docs/compatibility.md.
# Each creates or refreshes .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench install clean compat-table

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The test extra plus the benchmark extra: Ray Data is the oracle of tests/compat. torch is
# pinned to the CPU build the torch tests run with (other versions pull CUDA packages).
$(STAMP): $(PY) pyproject.toml setup.py
	$(PY) -m pip install --quiet -e ".[test,benchmark]" "torch==2.13.0"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest -q

# Daft caps pyarrow below the version shardflow is tested with, so it gets a venv of its own
# (benchmarks/systems.py runs Daft's children with it); the main venv keeps its pyarrow.
DAFT_VENV := .venv-daft
DAFT_STAMP := $(DAFT_VENV)/.installed

$(DAFT_STAMP):
	$(PYTHON) -m venv $(DAFT_VENV)
	$(DAFT_VENV)/bin/python -m pip install --quiet "daft>=0.7,<0.8" numpy
	touch $(DAFT_STAMP)

bench: $(STAMP) $(DAFT_STAMP)
	$(PY) -m pip install --quiet -e ".[test,benchmark]"
	$(PY) benchmarks/run.py $(BENCH_ARGS)

compat-table: $(STAMP)
	$(PY) tests/compat/gen_compat_table.py

clean:
	rm -rf $(VENV) $(DAFT_VENV) build *.egg-info
