# `make bench-tuned`: does the MPI library's own MPI_Alltoall get faster with the table the testbed exports?
# `bench tune` sweeps every algorithm on 4 ranks (three launches), decides, exports the tuning file for
# the library in use, measures native without and with it (alternating, TUNED_ROUNDS launches each), gives
# the cells the library ran slower back to it, verifies again, and prints the gains and how to apply the file.
ifndef TUNED_DIR
TUNED_DIR := results/tuned-$(shell date -u +%Y%m%dT%H%M%SZ)
endif
TUNED_SIZES ?= 8,64,512,2K,8K,32K,128K,512K,1M
TUNED_ROUNDS ?= 6
# Oversubscribed ranks (4 on 2 cores here) that spin while waiting make timings swing by 10x
# from run to run; MPICH's nanosleep yield steadies them. Set TUNED_ENV= on a real cluster.
TUNED_ENV ?= MPIR_CVAR_ENABLE_HEAVY_YIELD=1

.PHONY: bench-tuned
bench-tuned: install
	env $(TUNED_ENV) $(BIN)/python -m bench tune --nprocs 4 --sizes $(TUNED_SIZES) --iterations 20 \
	  --verify-iterations 15 --rounds $(TUNED_ROUNDS) --revert-slower --output $(TUNED_DIR)
