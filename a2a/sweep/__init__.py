"""What both backends share: the grid (variants, points), the sweep's config and its defaults, meshes, workloads,
the session that walks a launch's points and keeps the record, and the record's directory naming.

`bench run` walks it with the MPI driver (a2a.measure), `bench simulate` with the simulator
(a2a.simulate); neither imports the other. Imports: algos, record and the ground.
"""
