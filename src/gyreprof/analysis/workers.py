"""The sampler of a multi-process collector, read from its workers' own time.

A TorchRL ``MultiSyncCollector`` / ``MultiAsyncCollector`` collects in worker
processes: each worker's inner collector runs the policy and steps the envs, and the
training process only waits for the batches. Under ``gyreprof run`` each worker
keeps, in its sampler's counters (``model.summary.COLLECT_COUNTER_PREFIX``), its
batches' wall time and the env_step, env_reset and fwd time recorded inside them
(``integrations.libs.torchrl``). :func:`from_snapshots` reads them per worker into
:class:`CollectorWorkers`; given to ``diagnose`` (its ``collector_workers`` option), they
make the verdict's sampler part speak of them: shares of the workers' collection wall time (env, fwd, the untimed rest and
its code sites from the workers' stack samples), never the workers' summed phase
time against the training process's wall time. The workers run in parallel, so
their times are added only as a share of their added wall times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gyreprof._support import advice as _advice
from gyreprof._support.format import UNTIMED, fmt_ns, fmt_pct
from gyreprof.analysis import sites as _sites
from gyreprof.model.summary import COLLECT_COUNTER_PREFIX as _P

#: the parts of a worker's collection time, in the order they are named
PARTS = ("env_step", "env_reset", "fwd")
_WHAT = {"env_step": "env_step", "env_reset": "env_reset", "fwd": "fwd (the policy)"}


@dataclass(frozen=True)
class WorkerTime:
    """One worker process's batches: how many, their wall time, and the ns of each of
    ``PARTS`` recorded inside them."""

    pid: int
    batches: int
    wall_ns: int
    env_step_ns: int = 0
    env_reset_ns: int = 0
    fwd_ns: int = 0

    def part_ns(self, part: str) -> int:
        return int(getattr(self, f"{part}_ns"))

    @classmethod
    def from_counters(cls, pid: int, counters: Any) -> WorkerTime | None:
        """The worker's batches from its sampler snapshot's counters; None when it
        counted none (not a collector's worker)."""
        batches = int(counters.get(f"{_P}batches", 0))
        wall = int(counters.get(f"{_P}wall_ns", 0))
        if batches <= 0 or wall <= 0:
            return None
        # a part is at most the wall time it was recorded in (a clamp, never a rescale)
        parts = {p: min(wall, max(0, int(counters.get(f"{_P}{p}_ns", 0)))) for p in PARTS}
        over = sum(parts.values())
        if over > wall:  # only by clock rounding: the parts are disjoint phases
            parts = {p: v * wall // over for p, v in parts.items()}
        return cls(pid, batches, wall, **{f"{p}_ns": v for p, v in parts.items()})


@dataclass(frozen=True)
class CollectorWorkers:
    """The collector's workers and the training loop's wall time they are compared to.

    ``shares``: each part's share of the workers' collection wall time (their wall
    times added, so it never passes 100% however many run in parallel), the rest under
    ``"(untimed)"``. ``loop_wall_ns``: the training loop's wall time (its wait and
    compute), ``loop_wait_ns`` its wait in it."""

    workers: tuple[WorkerTime, ...]
    loop_wall_ns: float = 0.0
    loop_wait_ns: float = 0.0

    @property
    def wall_ns(self) -> int:
        return sum(w.wall_ns for w in self.workers)

    @property
    def batches(self) -> int:
        return sum(w.batches for w in self.workers)

    @property
    def shares(self) -> dict[str, float]:
        wall = self.wall_ns
        out = {p: sum(w.part_ns(p) for w in self.workers) / wall for p in PARTS}
        out[UNTIMED] = max(0.0, 1.0 - sum(out.values()))
        return out

    @property
    def leading(self) -> str:
        """The largest part (``"(untimed)"`` included)."""
        shares = self.shares
        return max(shares, key=lambda p: shares[p])

    def wall_words(self) -> str:
        """Wall time against wall time: each worker's collection time, and the training
        loop's wall time over the same run."""
        n = len(self.workers)
        mean = self.wall_ns / n
        text = (
            f"each worker collected {fmt_ns(mean)} on average ({self.batches} batches in "
            f"all; {', '.join(fmt_ns(w.wall_ns) for w in self.workers[:4])}"
            + (", ..." if n > 4 else "")
            + ")"
        )
        if self.loop_wall_ns > 0:
            text += (
                f", busy {fmt_pct(min(1.0, mean / self.loop_wall_ns))} of the training "
                f"loop's {fmt_ns(self.loop_wall_ns)} wall time"
            )
            if self.loop_wait_ns > 0:
                text += f", in which it waited {fmt_ns(self.loop_wait_ns)} for batches"
        return text


def from_snapshots(
    pids_snaps: Sequence[tuple[int, Any]], trainer: Any = None
) -> CollectorWorkers | None:
    """The collector workers among ``(pid, sampler snapshot)`` pairs (those whose
    counters hold batches), compared to ``trainer`` (its Summary or Snapshot: the
    training loop's wait and compute); None when no worker counted a batch."""
    found = []
    for pid, snap in pids_snaps:
        if snap is None:
            continue
        w = WorkerTime.from_counters(pid, snap.counters)
        if w is not None:
            found.append(w)
    if not found:
        return None
    wall = wait = 0.0
    if trainer is not None:
        s = trainer.summary() if hasattr(trainer, "summary") else trainer
        w_st, c_st = s.phases.get("wait"), s.phases.get("compute")
        if w_st is not None and c_st is not None:
            wait = float(w_st.sum_ns)
            wall = wait + float(c_st.sum_ns)
    return CollectorWorkers(tuple(sorted(found, key=lambda w: w.pid)), wall, wait)


def line(cw: CollectorWorkers, site_rows: list[dict[str, Any]]) -> str:
    """The verdict's sampler reason read from the workers: their parts as shares of their
    collection wall time, beside the training loop's, and their untimed time by site."""
    shares = cw.shares
    order = sorted(shares, key=lambda p: shares[p], reverse=True)
    parts = ", ".join(
        f"{'untimed' if p == UNTIMED else _WHAT[p]} "
        f"{'takes ' if i == 0 else ''}{fmt_pct(shares[p])}"
        + (" of their collection time" if i == 0 else "")
        for i, p in enumerate(order)
        if i == 0 or shares[p] >= 0.005
    )
    n = len(cw.workers)
    text = (
        f"sampler: in the {n} collector worker{'s' if n != 1 else ''}, {parts} (timed in "
        f"the workers, as shares of their collection wall time: {cw.wall_words()})"
    )
    if site_rows:
        text += f"; their untimed time by site: {_sites.listing(site_rows)} (from stack samples)"
    return text


def advice(cw: CollectorWorkers, site_rows: list[dict[str, Any]]) -> str:
    """The first advice where the sampler is to be tuned: the workers' leading part (or
    their largest untimed site)."""
    shares = cw.shares
    top = cw.leading
    share = fmt_pct(shares[top])
    if top == "fwd":
        return (
            f"the policy forward in the collector's workers leads ({share} of their collection "
            "time): make it cheaper per step (a smaller or compiled policy, or a GPU through "
            "the collector's policy_device), give each worker more envs (a batched or "
            "ParallelEnv per worker) so one forward serves them all, or add workers where "
            "CPU cores are free"
        )
    if top in ("env_step", "env_reset"):
        return (
            f"env stepping in the collector's workers leads ({top} {share} of their collection "
            "time): add workers where CPU cores are free, or make the env step cheaper; "
            + _advice.check_parallelism()
        )
    if site_rows:
        return (
            f"look first at {_sites.where(site_rows[0])} in the collector's workers: "
            f"{_sites.share_words(site_rows[0])} of their collection time went there, outside "
            "the env calls and the policy forward (stack samples)"
        )
    return (
        f"the collector's own work between the env calls and the policy forward leads in "
        f"its workers (untimed, {share} of their collection time): tensordict handling, "
        "transforms, the copies into the batch; rerun with the stack sampler on to name it"
    )
