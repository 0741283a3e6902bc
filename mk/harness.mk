# The C reference (a2a/workflows/c/alltoall_ref.c), built with the MPI library's own mpicc, and
# `make bench-harness`: C and `python -m bench run --algorithms native` side by side at 2 ranks,
# and IMB-MPI1 beside the imb protocol when HARNESS_IMB names its binary (docs/harness.md: how to build it).
HARNESS_REFERENCE := build/alltoall_ref
HARNESS_SIZES ?= 8,1K,64K,1M
HARNESS_REPEATS ?= 5
HARNESS_IMB ?=

.PHONY: harness-reference bench-harness

harness-reference: $(HARNESS_REFERENCE)

$(HARNESS_REFERENCE): a2a/workflows/c/alltoall_ref.c | $(BIN)/.installed
	@mkdir -p $(dir $@)
	$(BIN)/mpicc -O2 -o $@ $<

bench-harness: $(HARNESS_REFERENCE)
	$(BIN)/python -m bench harness --nprocs 2 --sizes $(HARNESS_SIZES) --repeats $(HARNESS_REPEATS) --reference $(HARNESS_REFERENCE) \
		$(if $(HARNESS_IMB),--imb $(HARNESS_IMB))
