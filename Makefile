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

# The test extra plus the benchmark extra: Ray Data is the oracle of tests/compat.
$(STAMP): $(PY) pyproject.toml setup.py
	$(PY) -m pip install --quiet -e ".[test,benchmark]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run.py

compat-table: $(STAMP)
	$(PY) tests/compat/gen_compat_table.py

clean:
	rm -rf $(VENV) build *.egg-info
