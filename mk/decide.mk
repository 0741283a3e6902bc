# `make bench-tuned`: does MPICH's own MPI_Alltoall get faster with the table the testbed exports?
# Sweep every algorithm on 4 ranks, decide, export the MPICH selection file, then measure
# native without and with the file (alternating, TUNED_ROUNDS launches each) and print per size
# the ratio tuned/default with a Mann-Whitney verdict over the launches (each launch's median). Cells the library ran significantly
# slower (its implementation of an algorithm is not the testbed's) go back to native in
# verified.json, which is exported and measured the same way.
ifndef TUNED_DIR
TUNED_DIR := results/tuned-$(shell date -u +%Y%m%dT%H%M%SZ)
endif
TUNED_SIZES ?= 8,64,512,2K,8K,32K,128K,512K,1M
TUNED_ITERATIONS ?= 15
TUNED_ROUNDS ?= 6
# Oversubscribed ranks (4 on 2 cores here) that spin while waiting make timings swing by 10x
# from run to run; MPICH's nanosleep yield steadies them. Set TUNED_ENV= on a real cluster.
TUNED_ENV ?= MPIR_CVAR_ENABLE_HEAVY_YIELD=1
TUNED_RUN = env $(TUNED_ENV) $(BIN)/mpirun -n 4 $(BIN)/python -m bench run --nprocs 4 --sizes $(TUNED_SIZES) --quiet

.PHONY: bench-tuned
bench-tuned: install
	mkdir -p $(TUNED_DIR)
	$(TUNED_RUN) --iterations 20 --output $(TUNED_DIR)/sweep
	$(BIN)/python -m bench decide $(TUNED_DIR)/sweep --output $(TUNED_DIR)/decision.json
	$(BIN)/python -m bench export $(TUNED_DIR)/decision.json --format mpich \
	  --output $(TUNED_DIR)/mpich.json --env > $(TUNED_DIR)/mpich.env
	@echo "== applying: $$(cat $(TUNED_DIR)/mpich.env | tr '\n' ' ')"
	for round in $$(seq $(TUNED_ROUNDS)); do \
	  $(TUNED_RUN) --algorithms native --iterations $(TUNED_ITERATIONS) --output $(TUNED_DIR)/default-$$round || exit 1; \
	  env $$(cat $(TUNED_DIR)/mpich.env) $(TUNED_RUN) --algorithms native --iterations $(TUNED_ITERATIONS) \
	    --output $(TUNED_DIR)/tuned-$$round || exit 1; \
	done
	$(BIN)/python -m bench compare --algorithm native --metric median \
	  $$(for r in $$(seq $(TUNED_ROUNDS)); do echo --baseline $(TUNED_DIR)/default-$$r --tuned $(TUNED_DIR)/tuned-$$r; done) \
	  --revert-slower $(TUNED_DIR)/decision.json --output $(TUNED_DIR)/verified.json | tee $(TUNED_DIR)/comparison.txt
	@echo "== verified table: cells the library ran slower are back to native; measuring again"
	$(BIN)/python -m bench export $(TUNED_DIR)/verified.json --format mpich \
	  --output $(TUNED_DIR)/verified-mpich.json --env > $(TUNED_DIR)/verified-mpich.env
	for round in $$(seq $(TUNED_ROUNDS)); do \
	  $(TUNED_RUN) --algorithms native --iterations $(TUNED_ITERATIONS) --output $(TUNED_DIR)/default2-$$round || exit 1; \
	  env $$(cat $(TUNED_DIR)/verified-mpich.env) $(TUNED_RUN) --algorithms native --iterations $(TUNED_ITERATIONS) \
	    --output $(TUNED_DIR)/verified-$$round || exit 1; \
	done
	$(BIN)/python -m bench compare --algorithm native --metric median \
	  $$(for r in $$(seq $(TUNED_ROUNDS)); do echo --baseline $(TUNED_DIR)/default2-$$r --tuned $(TUNED_DIR)/verified-$$r; done) \
	  | tee $(TUNED_DIR)/verified-comparison.txt
