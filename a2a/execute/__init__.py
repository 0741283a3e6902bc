"""What runs a plan.

planning (one rank's call checked, the ranks' agreement, the factory prepared), engine (the Python progression
engine that advances any plan non-blocking), executor (the C executor of c/, which runs a schedule's data, and its
binding), calls (the one-shot a2a.alltoall, ...), oneshot (their cache of plans) and agreement (one problem on any
rank is one error on every rank, without blocking).

Imports: a2a.schedules, a2a.algos, a2a.record and the ground. a2a.algos.registry names a2a.execute.planning for
Algorithm.plan rather than importing it: the interface says what a plan needs and this wing provides it.
"""
