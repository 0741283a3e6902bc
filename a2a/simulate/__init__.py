"""Simulating on SimGrid: simgrid (finding it), capture (schedules captured from the real plans), varied (an
alltoallv's schedule: a direct program at a count matrix), schedule_cache, platforms and machine (the simulated
machine), calibrate (fitted to a record), traces, replay (in the background, s4u_replay.cpp among the replayers) and
driver (the backend of the session), effort (what a point costs to replay beside the others: the ETA's weights).

It walks the sweep wing's grid through its session, as the MPI driver does, and never imports it. Imports: sweep,
deploy, execute, schedules, analysis, algos, record and the ground.
"""
