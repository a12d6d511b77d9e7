"""Did the parallelism take effect?

A ``num_workers=8`` that silently runs one worker, or eight workers that each
start sixteen BLAS threads on a sixteen-core box, are among the most common
reasons sampling is slow. This module answers the question from the outside:

* ``register_worker(role, **config)`` — called inside each worker at start;
  records the role, the config the worker actually read and the thread
  settings it actually runs with (see :mod:`.registry`).
* ``census(pid)`` — the process tree under ``pid``: per process name, command
  line, state, CPU %, RSS, thread count and, for registered workers, role and
  config; grouped so that "4 × env_worker" reads at a glance.
* ``check_parallelism(pid, expected={role: n}, config={key: value})`` —
  expected vs observed worker counts, intended vs read config, oversubscription
  (workers × threads per worker beyond the cores the process may use: CPU
  affinity and cgroup quota), optionally workers that never use CPU. Plain-words
  findings with the numbers behind them and an exit code for scripts.
* ``compare_throughput(a, b, workers=(1, 4))`` — whether env-step throughput
  moved when the worker count changed.

Layout: :mod:`.registry` (what a worker says about itself), :mod:`.cpu`
(cores a process may use), :mod:`.census` (the process tree),
:mod:`.findings` (the check), :mod:`.throughput` (throughput at two worker
counts).
"""

from __future__ import annotations

from gyreprof.analysis.parallelism.census import (
    Census,
    ProcessGroup,
    ProcessInfo,
    ThreadInfo,
    census,
)
from gyreprof.analysis.parallelism.cpu import CpuLimits, cpu_limits
from gyreprof.analysis.parallelism.findings import (
    Finding,
    ParallelismReport,
    WorkerThreads,
    check_parallelism,
)
from gyreprof.analysis.parallelism.registry import (
    THREAD_ENV_VARS,
    WorkerRecord,
    register_worker,
    unregister_worker,
)
from gyreprof.analysis.parallelism.throughput import ThroughputComparison, compare_throughput

__all__ = [
    "Census",
    "CpuLimits",
    "Finding",
    "ParallelismReport",
    "ProcessGroup",
    "ProcessInfo",
    "THREAD_ENV_VARS",
    "ThreadInfo",
    "ThroughputComparison",
    "WorkerThreads",
    "WorkerRecord",
    "census",
    "check_parallelism",
    "compare_throughput",
    "cpu_limits",
    "register_worker",
    "unregister_worker",
]
