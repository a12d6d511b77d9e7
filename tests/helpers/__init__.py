"""Helpers the tests share: helper processes (procs/, live_procs/) and the pure-Python
reference twins of the compiled core (reference.py).

tests/sweep_samplers/ and tests/workers_parallel.py belong here too; they move with the
sweep and parallelism work.
"""
