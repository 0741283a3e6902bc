"""A bursty background load, as a shared node has: each worker alternates busy and idle phases of random length.

    python examples/bursty_load.py --workers 2 --seconds 120 &     # beside a sweep, then: kill %1 (its workers too)

Each of `--workers` processes spins for a random 20-300 ms, sleeps for a random 20-300 ms, and so on, until
`--seconds` have passed (seeded, so two runs load alike). The A/A test of docs/decide.md runs beside it.
"""
from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import sys
import time


def worker(seed: int, seconds: float, shortest: float, longest: float) -> None:
    """Spin and sleep in random phases of `shortest`..`longest` seconds until `seconds` have passed."""
    draw, end = random.Random(seed), time.monotonic() + seconds
    while time.monotonic() < end:
        busy_until = time.monotonic() + draw.uniform(shortest, longest)
        while time.monotonic() < busy_until:
            pass
        time.sleep(draw.uniform(shortest, longest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="processes, each bursty [2]")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long the load lasts [600]")
    parser.add_argument("--phase-ms", default="20:300", help="shortest:longest phase in milliseconds [20:300]")
    parser.add_argument("--seed", type=int, default=0)
    given = parser.parse_args()
    shortest, longest = (float(t) / 1e3 for t in given.phase_ms.split(":"))
    workers = [multiprocessing.Process(target=worker, args=(given.seed + k, given.seconds, shortest, longest),
                                       daemon=True) for k in range(given.workers)]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # daemon workers end with this process
    for process in workers:
        process.start()
    for process in workers:
        process.join()


if __name__ == "__main__":
    main()
