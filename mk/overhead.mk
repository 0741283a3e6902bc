# Our algorithms against the library's C twins (MPICH via CVARs, Open MPI via coll_tuned MCA variables; docs/harness.md).
.PHONY: bench-overhead
bench-overhead: install
	$(BIN)/python -m bench overhead --nprocs 2,4
