"""Measuring with MPI: the driver that plans, times and checks each point, the timing protocols, clocks, caches,
the job's facts and a point's traffic. It walks the sweep wing's grid through its session. Imports: sweep,
analysis, algos, record and the ground."""
