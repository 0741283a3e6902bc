"""Simulating on SimGrid: simgrid (finding it), capture (schedules captured from the real plans), varied (an
alltoallv's schedule: a direct program at a count matrix), schedule_cache, platforms and machine (the simulated
machine), calibrate (fitted to a record), traces, replay (in the background, s4u_replay.cpp among the replayers) and
driver (the backend of the session), effort (what a point costs to replay beside the others: the ETA's weights).

Beside SimGrid, the analytical network: rounds (a schedule's events as arrays of each round's messages), wires (the
links a message crosses, routed as SimGrid's platforms route), analytical (a round timed on its busiest link, or each
message alone) and analytical_run (`bench simulate --backend analytical`, into the same record).

It walks the sweep wing's grid through its session, as the MPI driver does, and never imports it. Imports: sweep,
deploy, execute, schedules, analysis, algos, record and the ground.
"""
