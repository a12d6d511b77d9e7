"""Controlled sweeps: change one setting of a sampler, keep the rest fixed, measure.

``sweep(factory, "batch_size", [8, 16, 32, 64], fixed={"num_envs": 8})`` builds
the sampler once per value and repeat with ``factory(**fixed, batch_size=value)``
and measures, per value:

* **samples per second from sampling time only** — the time spent inside the
  sampler calls (one gyreprof step per call), not the harness around them;
  the first ``warmup`` calls are excluded and reported apart (warm-up mean
  and first call);
* per-call mean, p50 and p99, and — when the sampler records its own phases —
  the per-phase time per call and share, plus ``(other)``: call time no
  declared phase covered;
* the peak resident memory (RSS) of the process that ran it **and of the whole
  sampler**: that process plus its worker processes (vector-env workers, data
  loaders), which are polled while the run goes; and the peak CUDA memory torch
  allocated when the sampler uses torch with CUDA (torch is never imported by
  the sweep itself);
* every figure as the median and min–max over ``repeats`` runs; a value whose
  throughput cannot be told apart from a neighbour's (see *Decisions*) is
  marked *not distinguishable* from it.

The sampler
-----------
``factory(**fixed, **{param: value})`` returns a *sampler*: an object with a
``.sample()`` method, or a callable, that makes one sampling call and returns
how many samples it produced: an int, or the batch itself (an array counts its
first dimension, a dict of arrays their common length, a list its length).
``gyreprof selfcheck`` reads the return value by the same rules
(:mod:`gyreprof._support.sample_count`), and both say which rule they used; a call
that returns no samples, a bool, text or any other object is reported as
invalid for that value. A sampler with a ``close()``
method is closed after its run. To see where the time goes inside a call, the
factory takes a ``prof`` keyword and declares its phase names::

    def make_sampler(batch_size, num_envs, prof=None):
        return Sampler(batch_size, num_envs, prof)
    make_sampler.phases = ("policy", "env", "store")   # or sweep(..., phases=[...])

The sweep builds a :class:`~gyreprof.Profiler` with those phases and passes it
in; the sampler times its phases with ``prof.phase(name)``, ``prof.lap(id)``
or ``prof.record(name, ns)`` inside each call. The sweep itself marks one step
per call (``prof.begin()``/``prof.end()``), so the sampler must not.

Isolation
---------
``isolate=True`` (the default) runs **every repeat of every value in a fresh
interpreter** (``python -c`` starting ``gyreprof.analysis.sweep.worker``), so
memory peaks, caches, thread pools and allocator state do not bleed from one
run into the next, and a crash, an out-of-memory kill or a hang is reported
for that value while the sweep goes on. The factory must then be importable by
name: a ``'module:name'`` string, or a module-level function or class (one
defined in a script's ``__main__`` works: the script is re-imported without
running its ``if __name__ == "__main__":`` block). Lambdas and nested functions
are refused with a message saying so. ``fixed`` values must be picklable.

``timeout_s`` bounds each run (start-up, build, warm-up and measured calls);
a run past it is killed together with any processes it started, and its
error says where it was. The first failed run of a value ends that value
(its other repeats are skipped). ``isolate=False`` runs everything in this
process: faster to start, but peak RSS is this process's high-water mark so
far (it can never fall from one value to the next) and a hung run can only
be abandoned, not killed; the result says so.

An isolated run never outlives the sweep: each run is a process group of its
own, killed with everything it started when the run ends, when the sweep is
interrupted (Ctrl-C; SIGTERM, after which the process still dies by SIGTERM)
and, through a parent-death signal, when the sweeping process itself is
killed or crashes; the run's temporary folder goes with it
(:mod:`gyreprof._support.subproc`).

Sweeping a script
-----------------
``gyreprof sweep -- python train.py --num-envs '{1,2,4,8}'`` sweeps an unmodified
script: the one brace list of the command (or of an ``--env NAME={...}``) gives the
values (:mod:`gyreprof.analysis.sweep.script`), each value runs the command under
``gyreprof run``'s launcher, bounded by ``--max-s`` / ``--max-steps``
(:mod:`gyreprof.commands._sweep_script`), and the values, repeats, stop rule and
result are the ones below (``run_values``, ``conclude`` in ``api``); the result's
``settings["kind"]`` is ``"script"``. :func:`sweep_command` writes such a command for a
run's command line.

Decisions
---------
Values are tried in ascending order. The sweep **stops** growing the value
when the throughput gain from the previous value is within ``flat_within``
(or negative) while peak memory (the whole sampler's RSS, or CUDA memory)
keeps rising — "flat from" the previous value — or when a run's peak RSS of
the whole sampler (its worker processes included) crosses ``memory_limit``.

The **recommended** value is *the smallest value whose median throughput is
not distinguishable from the best median*, among the values that ran cleanly
and stayed under the memory limit. Two medians are distinguishable when the
larger exceeds the smaller by more than ``(1 + flat_within) * (1 + noise)``,
the noise being twice the median over the clean values of their relative
min–max spread of samples/s (see :mod:`gyreprof.analysis.sweep.rule`). A sampler whose throughput does not depend on the value thus
gets its smallest value on every rerun, where "the largest median" would
follow the noise. The table's *note* column marks the recommended value,
``flat from here``, the stop, ``over memory limit``, a failure status and
``~16``: not distinguishable from the neighbour 16 by the same test.
The report states this as a
controlled result for the fixed settings it names, never as a universal
optimum, and warns when a fixed setting did not stay fixed (the sampler
reports a different value for a setting it was given, or observable thread and
process counts changed across values).

JSON schema (``SweepResult.to_dict()``, format ``"gyreprof.sweep/2"``; ``/1`` still reads)
----------------------------------------------------------------------
Written by one generic encoder over the result's dataclasses; fields added
since the first version (``peak_tree_rss_bytes``, ``count_rule``, ``pid``,
``abandoned``) are optional when read, so older files still load.

Top level: ``format``, ``gyreprof`` (version), ``factory`` (``"module:name"``),
``param``, ``values`` (asked, ascending), ``fixed`` (name → value; values JSON
cannot hold are their ``repr``), ``settings`` (``steps``, ``warmup``,
``repeats``, ``isolate``, ``flat_within``, ``memory_limit_bytes``,
``timeout_s``, ``phases``), ``environment`` (host, platform, python, cpu
counts, thread environment variables), ``stop_reason`` (``"flat"``,
``"memory_limit"`` or ``"end"``), ``stop_detail`` (plain words),
``stopped_at``, ``flat_from``, ``recommended`` (a value or null), ``skipped``
(values not tried), ``warnings`` (list of strings), ``report`` (the plain-words
report) and ``points``.

Each point: ``value``, ``status`` (``"ok"``, ``"error"``, ``"invalid"``,
``"crash"``, ``"timeout"``), ``error``, ``samples_per_s`` (median),
``spread`` (``[min, max]`` samples/s), ``peak_rss_bytes`` (median),
``gain`` (fraction vs the previous measured point, or null),
``not_distinguishable_from`` (neighbour values), ``over_memory_limit``,
``figures`` (name → ``{"median", "min", "max", "n"}`` for ``samples_per_s``,
``call_mean_ns``, ``call_p50_ns``, ``call_p99_ns``, ``call_max_ns``,
``samples_per_call``, ``sample_time_ns``, ``warmup_call_mean_ns``,
``first_call_ns``, ``peak_rss_bytes`` (the measuring process),
``baseline_rss_bytes``, ``children_rss_bytes`` (peak summed RSS of its worker
processes), ``peak_tree_rss_bytes`` (the whole sampler), ``peak_gpu_bytes``),
``phases`` (phase → figure
dicts ``per_call_ns``, ``share``, ``p50_ns``, ``p99_ns``, ``count_per_call``)
and ``runs`` (one object per run with the raw figures of that run, its
``status``, ``error``, ``stage``, ``exit_code``, ``wall_s``, ``threads``,
``observed`` settings, ``count_rule``, ``notes`` and, in a script sweep, ``verdict_bound``
and ``wait_ratio``; ``summary`` holds the run's gyreprof
Summary dict when ``to_dict(summaries=True)``). Times are in ns, memory in
bytes, rates per second; missing numbers are ``NaN`` or null.
"""

from __future__ import annotations

from gyreprof.analysis.sweep.api import sweep
from gyreprof.analysis.sweep.factory import SweepUsageError
from gyreprof.analysis.sweep.record import RUN_FORMAT, RunResult
from gyreprof.analysis.sweep.result import (
    FORMAT,
    Figure,
    PhaseFigures,
    SweepPoint,
    SweepResult,
    SweepRun,
    parse_bytes,
)
from gyreprof.analysis.sweep.script import (
    BraceSweepError,
    ScriptSweep,
    find_sweepable_flag,
    parse_brace_sweep,
    sweep_command,
)

__all__ = [
    "FORMAT",
    "BraceSweepError",
    "ScriptSweep",
    "find_sweepable_flag",
    "parse_brace_sweep",
    "sweep_command",
    "RUN_FORMAT",
    "Figure",
    "PhaseFigures",
    "RunResult",
    "SweepPoint",
    "SweepResult",
    "SweepRun",
    "SweepUsageError",
    "parse_bytes",
    "sweep",
]
