# make demo: run examples/quickstart.py. make test: lint, types, the wheel's contents, then
# the test suite, with the differential suite against Ray Data (6 minutes on two idle cores).
# make test-slow (the slow tier) and make test-cluster (multi-node tests) complete what CI runs.
# make fmt: fix what ruff can fix and format. make lint / make typecheck / make wheel-check /
# make pytest: one step of make test. make compat-table: regenerate docs/compatibility.md.
# Each creates or refreshes .venv and installs what it needs.
SHELL := bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test ci lint fmt typecheck wheel wheel-check pytest test-slow test-cluster bench install clean \
	compat-table test-modin

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The test extra plus the bench extra: Ray Data is the oracle of tests/compat. torch is
# pinned to the CPU build the torch tests run with (other versions pull CUDA packages).
# The compiled extensions' sources are prerequisites: an edited C file is rebuilt.
$(STAMP): $(PY) pyproject.toml setup.py $(wildcard connectors/*/*.c connectors/*/*.h)
	$(PY) -m pip install --quiet -e ".[test,bench]" "torch==2.13.0"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

test: ci

# In this order: the quick checks fail first.
ci: lint typecheck wheel-check pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix --exit-zero --quiet .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix --exit-zero --quiet .

# mypy sees the package as it is installed: a tree of links named shardflow/ (sdk, engine,
# connectors inside); paths in its messages are mapped back to the source folders.
TYPECHECK := build/typecheck
PUBLIC_FILES := $(filter-out src/shardflow/__init__.py,$(wildcard src/shardflow/*.py))
PUBLIC_MODULES := -m shardflow $(patsubst src/shardflow/%.py,-m shardflow.%,$(PUBLIC_FILES)) \
	-p shardflow.orca
UNLINK_PATHS := sed -E 's;^shardflow/(sdk|engine|connectors)/;\1/;; s;^shardflow/;src/shardflow/;'

typecheck: $(STAMP)
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/shardflow
	ln -s $(CURDIR)/src/shardflow/* $(CURDIR)/sdk $(CURDIR)/engine $(CURDIR)/connectors \
		$(TYPECHECK)/shardflow/
	cd $(TYPECHECK) && $(CURDIR)/$(PY) -m mypy --config-file $(CURDIR)/pyproject.toml \
		-p shardflow.sdk | $(UNLINK_PATHS)
	cd $(TYPECHECK) && $(CURDIR)/$(PY) -m mypy --config-file $(CURDIR)/pyproject.toml \
		$(PUBLIC_MODULES) | $(UNLINK_PATHS)

# Built without build isolation (the venv's setuptools), from a clean build folder so no
# module deleted since the last build reaches the wheel.
wheel: $(STAMP)
	rm -rf build/lib build/bdist.* dist
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w dist .

wheel-check: wheel
	$(PY) tests/packaging/check_wheel.py dist/shardflow-*.whl

# Two workers (pytest-xdist): most tests wait on processes, servers and Ray, so two workers
# finish sooner on two cores. Tests that measure memory, or that wait on short deadlines,
# share one group and run one at a time (tests/conftest.py, SERIAL_GROUP). The few cases
# marked slow run with `make test-slow`. The 20 slowest tests are listed at the end, to keep
# the suite's time in view (6 minutes on two idle cores is the goal).
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts hundreds of processes (Ray workers, actors, spawned workers), and each would
# compile shardflow's modules again; the cache goes to __pycache__ folders git ignores.
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE

pytest: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow and not cluster" --durations=20

test-slow: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n 2 --dist loadgroup -m slow

# The tests on simulated multi-node Ray clusters (tests/cluster), the long ones (node loss,
# locality) included; `make test` leaves them out (starting a cluster costs ~20 s of CPU) and
# .ci/run runs them all after it. CLUSTER_SELECT picks some: CLUSTER_SELECT="-m cluster_long".
CLUSTER_SELECT ?=
test-cluster: $(STAMP)
	$(TEST_ENV) SHARDFLOW_TEST_CLUSTER=1 $(PY) -m pytest -q $(CLUSTER_SELECT) tests/cluster

# Daft caps pyarrow below the version shardflow is tested with, so it gets a venv of its own
# (benchmarks/systems.py runs Daft's children with it); the main venv keeps its pyarrow.
DAFT_VENV := .venv-daft
DAFT_STAMP := $(DAFT_VENV)/.installed

$(DAFT_STAMP):
	$(PYTHON) -m venv $(DAFT_VENV)
	$(DAFT_VENV)/bin/python -m pip install --quiet "daft>=0.7,<0.8" numpy
	touch $(DAFT_STAMP)

# Modin caps pandas below 2.4 while shardflow's test venv has pandas 3, so from_modin/to_modin
# are tested in a venv of their own (pandas 2.3, Modin on its Python and Ray engines); the main
# suite skips those tests.
MODIN_VENV := .venv-modin
MODIN_STAMP := $(MODIN_VENV)/.installed

$(MODIN_STAMP):
	$(PYTHON) -m venv $(MODIN_VENV)
	$(MODIN_VENV)/bin/python -m pip install --quiet "pandas>=2.2,<2.4" "modin>=0.32" \
		"ray[data]>=2.60,<2.61" pytest pytest-timeout
	$(MODIN_VENV)/bin/python -m pip install --quiet -e .
	touch $(MODIN_STAMP)

test-modin: $(MODIN_STAMP)
	$(TEST_ENV) $(MODIN_VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/engine/api/interop/test_interop_modin.py

bench: $(STAMP) $(DAFT_STAMP)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	$(PY) benchmarks/run.py $(BENCH_ARGS)

compat-table: $(STAMP)
	$(PY) tests/compat/gen_compat_table.py

clean:
	rm -rf $(VENV) $(DAFT_VENV) $(MODIN_VENV) build dist *.egg-info
