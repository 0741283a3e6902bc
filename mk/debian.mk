# The cluster's own MPI (docs/cluster-usage.md): the collective tests and the deploy tests again with Debian's MPICH and
# Debian's Open MPI, each in a venv of its own whose mpi4py is built from source against it (.ci/setup.d/debian-mpi.sh
# makes them, and installs the packages where they are missing). The collective tests run under the library's own
# mpirun -n $(NP); the deploy tests in plain pytest, liba2a built by the library's mpicc.
DEBIAN_VENVS ?= $(HOME)/.cache/a2a
DEBIAN_DEPLOY_TESTS ?= tests/test_fortran.py tests/test_liba2a_foreign.py tests/test_deploy.py tests/test_deploy_library.py
# Left to the venv's MPI: the deploy tests that race algorithms over whole programs (the documented loops), and those
# of tests/programs/ialltoall_recv.c, which -Werror does not build against MPICH 4.0.2's mpi.h (gcc 12's
# -Wstringop-overflow on MPI_STATUSES_IGNORE); neither library here serves those calls (no progress hook)
# (and the out-of-memory sweep, two dozen launches of liba2a's own logic: make test runs it)
DEBIAN_DEPLOY_SELECT ?= not documented_loop and not loop_by_hand and not nonblocking and not in_flight \
  and not out_of_memory $(foreach p,5 6 7 8,and not serves_a_c_program[$(p)])
# onesided (RMA windows) hangs in the collective tests under Debian's Open MPI 4.1.4 (4 ranks on 2 cores): left out
# there (docs/findings/debian-mpi.md)
DEBIAN_COLLECTIVE_SELECT_openmpi ?= not onesided
DEBIAN_COLLECTIVE_SELECT_mpich ?=

.PHONY: test-debian
test-debian:
	A2A_DEBIAN_VENVS=$(DEBIAN_VENVS) bash .ci/setup.d/debian-mpi.sh
	@set -e; for library in mpich openmpi; do \
	  bin=$(DEBIAN_VENVS)/debian-$$library/bin; \
	  flags=$$([ $$library = openmpi ] && echo "$(OMPI_FLAGS)" || true); \
	  echo "== Debian's $$library: the collective tests (mpirun -n $(NP)), then the deploy tests"; \
	  select=$$([ $$library = openmpi ] && echo "$(DEBIAN_COLLECTIVE_SELECT_openmpi)" || \
	            echo "$(DEBIAN_COLLECTIVE_SELECT_mpich)"); \
	  env $(KEEP_BYTECODE) $(TEST_ENV) $$bin/mpirun $$flags -n $(NP) $$bin/python -m pytest -q -p no:cacheprovider \
	    $${select:+-k "$$select"} tests/test_algorithms.py; \
	  env $(KEEP_BYTECODE) $$bin/python -m pytest -q -p no:cacheprovider -k "$(DEBIAN_DEPLOY_SELECT)" \
	    $(DEBIAN_DEPLOY_TESTS); \
	done
