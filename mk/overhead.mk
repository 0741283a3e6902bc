# Our algorithms against MPICH's C twins, forced through its CVARs (see README, "Performance").
.PHONY: bench-overhead
bench-overhead: install
	$(BIN)/python -m bench overhead --nprocs 2,4
