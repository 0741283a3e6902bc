"""Measuring with MPI: the driver that plans, times and checks each point, the timing protocols (timing, overlap),
clock (the global clock), cache (warm or cold), environment (the job's facts) and traffic (a point's buffers and
check data). It walks the sweep wing's grid through its session. Imports: sweep, deploy, execute, schedules,
analysis, algos, record and the ground."""
