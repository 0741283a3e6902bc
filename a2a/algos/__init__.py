"""The algorithm interface, and one file per algorithm (builtin/NAME.py).

registry (register, get, Algorithm, Kind), options, plugins, facts (what the rest of the testbed reads of an
algorithm), plan (Plan, and Prepared: what a factory may return), and the words algorithms are written with: cost
(formulas, link traffic), schedule (the steps a factory runs, as data), prebuilt (plan-time copies and message
specs), buffers (what a call may be given), nodes (which ranks share a node).

builtin/NAME.py holds everything about the algorithm NAME: its schedule, options, cost terms,
contention rounds and twins in the MPI libraries. Imports: a2a.record and the ground. A plan is
made by a2a.execute.planning, which the registry names rather than imports.
"""
