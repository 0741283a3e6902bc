# `make simgrid`: SimGrid 4.1's SMPI for `bench simulate`, built from source (mk/simgrid.sh).
SIMGRID_PREFIX ?= /usr/local

.PHONY: simgrid

simgrid:
	bash mk/simgrid.sh $(SIMGRID_PREFIX)
