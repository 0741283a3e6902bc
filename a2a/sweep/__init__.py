"""What both backends share: the grid (variants, points), the sweep's config and its defaults, parsing (option
values), launch (a launch's sweep from its options), mesh (meshes and replica groups), workload (count matrices,
a program's recording read by a2a.deploy.recorded among them), pattern (the check data every rank sends), the
session that walks a launch's points and keeps the record, and naming (the record's directory).

`bench run` walks it with the MPI driver (a2a.measure), `bench simulate` with the simulator
(a2a.simulate); neither imports the other. Imports: deploy, execute, schedules, algos, record and the ground.
"""
