# The emulated Gigabit cluster (needs root): the seed's experiment, and a clean-up after a crash.
.PHONY: seed-repro cluster-down

seed-repro: install
	$(BIN)/python -m bench seed-repro

cluster-down: install
	$(BIN)/python -m bench cluster down
