"""The one Python reader of a Recorder's stats block.

A stats block is the int64 array a ``Recorder`` writes (in private memory or in a
shared-memory segment). Its layout is declared once, in ``_core/recorder.pxd``;
this module turns it into named fields, and no other Python module indexes a
block by its raw words (``tests/test_structure.py`` checks that).

Regions, with ``nh = n_phases + 1`` histograms (the phases, then the whole step):

- header: scalar fields, read by name (``block.steps_completed`` ...);
- ``stat`` (nh, 4): steady count, sum, min, max; the count word is not kept by
  the writer, ``counts_total()`` adds up the buckets instead;
- ``first`` (nh,): first value recorded (-1: none);
- ``warm`` (nh, 3): warm-up count, sum, max;
- ``counts`` (nh, counts_len): steady histogram buckets;
- ``window_records()``: the closed rolling windows, oldest first;
- ``counters`` (max_counters,): event counters.

The header properties read the array each time they are asked, so a block over
a live view (``Recorder.stats_view()`` or a mapped segment) shows the writer's
latest state; region views share memory with the array (writable only when it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from gyreprof._core import recorder as _rec
from gyreprof._support.errors import ArgumentTypeError, InvalidValueError

_TWO63 = 1 << 63
_INT64_MAX = _TWO63 - 1

LAYOUT_VERSION: int = _rec.LAYOUT_VERSION


class _RecorderLike(Protocol):
    offsets: dict[str, int]
    n_phases: int

    def stats_view(self) -> np.ndarray: ...


@runtime_checkable
class WordSource(Protocol):
    """Stats-block words read on access (a live segment read with ``pread``):
    ``len(w)``, ``w[i]`` for one word, ``numpy.asarray(w)`` for a copy of them all."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> int: ...

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class HistogramWindow:
    """One histogram's row of a closed rolling window (ns; -1 where empty)."""

    count: int
    sum: int
    max: int
    p50: int
    p90: int
    p99: int


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a loop is now, read from its stats block without copying it.

    Returned by ``Profiler.progress()`` and ``LiveReader.progress()``; what the stall
    watchdog, the doctor's live evidence and ``gyreprof top`` read. Times are
    monotonic-clock ns (the clock of ``time.perf_counter_ns``); -1 where none yet.
    """

    step: int  # steps begun
    steps_completed: int
    phase: str | None  # the phase open now (None: between phases, or not known)
    phase_since_ns: int  # the last phase boundary (lap, begin, phase entry)
    now_ns: int  # when this was read
    last_write_ns: int  # the last begin/end/record/timed phase (lap moves phase_since_ns)
    counters: Mapping[str, int]  # event counters by name

    @property
    def last_activity_ns(self) -> int:
        """The latest of ``last_write_ns`` and ``phase_since_ns``: the loop's last sign of life."""
        return max(self.last_write_ns, self.phase_since_ns)

    @classmethod
    def combine(cls, parts: Sequence[Progress]) -> Progress:
        """Several writers of one loop (``per_thread`` recorders) as one: counts add up;
        the open phase is that of the writer that crossed a boundary last."""
        if not parts:
            raise InvalidValueError("Progress.combine needs at least one reading")
        latest = max(parts, key=lambda p: p.phase_since_ns)
        counters: dict[str, int] = {}
        for p in parts:
            for name, n in p.counters.items():
                counters[name] = counters.get(name, 0) + n
        return cls(
            step=sum(p.step for p in parts),
            steps_completed=sum(p.steps_completed for p in parts),
            phase=latest.phase,
            phase_since_ns=latest.phase_since_ns,
            now_ns=max(p.now_ns for p in parts),
            last_write_ns=max(p.last_write_ns for p in parts),
            counters=counters,
        )


class WindowRecord(NamedTuple):
    """A closed rolling window as the recorder wrote it."""

    start_ns: int
    end_ns: int
    first_step: int
    steps: int
    warmup: bool
    histograms: tuple[HistogramWindow, ...]  # phases in order, then the whole step


def block_words(config: Mapping[str, Any]) -> int:
    """Size in int64 words of the stats block a ``Recorder.config()`` describes."""
    return int(config["offsets"]["words"])


def window_stride(n_phases: int) -> int:
    """Words per closed-window record for ``n_phases`` phases."""
    return int(_rec.WIN_HEADER + _rec.WIN_FIELDS * (n_phases + 1))


def warmup_windows(rolling: np.ndarray, through_step: int) -> np.ndarray:
    """A copy of closed-window records with every window that holds one of the steps
    1..``through_step`` marked warm-up (``Snapshot.first_step_as_warmup``)."""
    out = np.array(rolling, dtype=np.int64, copy=True)
    if out.size:
        first = out[:, _rec.WIN_FIRST_STEP]
        out[(first <= through_step) & (first + out[:, _rec.WIN_STEPS] > 1), _rec.WIN_WARMUP] = 1
    return out


def _consistent(rows: np.ndarray, nh: int) -> np.ndarray:
    """Mask of window records whose percentiles are ordered and within the max."""
    ok = np.ones(rows.shape[0], dtype=bool)
    H, F = int(_rec.WIN_HEADER), int(_rec.WIN_FIELDS)
    for h in range(nh):
        base = H + F * h
        count = rows[:, base + _rec.WIN_COUNT]
        p50 = rows[:, base + _rec.WIN_P50]
        p90 = rows[:, base + _rec.WIN_P90]
        p99 = rows[:, base + _rec.WIN_P99]
        mx = rows[:, base + _rec.WIN_MAX]
        full = (p50 >= 0) & (p50 <= p90) & (p90 <= p99) & (p99 <= mx)
        ok &= np.where(count > 0, full, (p50 == -1) & (count == 0))
    return ok


def decode_windows(rolling: np.ndarray, n_phases: int) -> list[WindowRecord]:
    """Closed-window records (rows of ``StatsBlock.window_records()``) as named tuples."""
    out: list[WindowRecord] = []
    if rolling.size == 0:
        return out
    stride = window_stride(n_phases)
    if rolling.ndim != 2 or rolling.shape[1] != stride:
        raise InvalidValueError(
            f"window records of {n_phases} phases have {stride} words each, "
            f"got shape {rolling.shape}"
        )
    H, F = int(_rec.WIN_HEADER), int(_rec.WIN_FIELDS)
    c0 = int(_rec.WIN_COUNT)
    for row in rolling.tolist():  # plain ints: fast to unpack
        hists = tuple(
            HistogramWindow(*row[H + F * h + c0 : H + F * h + c0 + 6]) for h in range(n_phases + 1)
        )
        out.append(
            WindowRecord(
                start_ns=row[_rec.WIN_START],
                end_ns=row[_rec.WIN_END],
                first_step=row[_rec.WIN_FIRST_STEP],
                steps=row[_rec.WIN_STEPS],
                warmup=bool(row[_rec.WIN_WARMUP]),
                histograms=hists,
            )
        )
    return out


class StatsBlock:
    """Named fields over one stats block (see the module docstring).

    ``StatsBlock(stats, offsets, n_phases)``: ``stats`` is the int64 array,
    ``offsets`` the region offsets (``Recorder.offsets`` / ``config["offsets"]``).
    """

    __slots__ = ("_a", "_off", "n_phases", "nh", "counts_len", "max_windows", "max_counters")

    def __init__(
        self, stats: np.ndarray | WordSource, offsets: Mapping[str, int], n_phases: int
    ) -> None:
        words = int(offsets["words"])
        a: Any
        if isinstance(stats, WordSource) and not isinstance(stats, np.ndarray):
            # a word source (a live segment read on access): header words only, each read
            # when asked for; ``copy()`` gives a full block
            a = stats
            if len(a) < words:
                raise InvalidValueError(f"stats block has {len(a)} words, {words} needed")
        else:
            a = np.asarray(stats)
            if a.dtype != np.int64 or a.ndim != 1:
                raise ArgumentTypeError(
                    f"a stats block is a 1-d int64 array, got {a.dtype} {a.shape}"
                )
            if a.shape[0] < words:
                raise InvalidValueError(f"stats block has {a.shape[0]} words, {words} needed")
        self._a = a
        self._off = {k: int(v) for k, v in offsets.items()}
        self.n_phases = int(n_phases)
        self.nh = self.n_phases + 1
        self.counts_len = (self._off["wcounts"] - self._off["counts"]) // self.nh
        # the sums' high words ("sumhi") follow the counters where the layout has them
        self.max_counters = self._off.get("sumhi", words) - self._off["counters"]
        self.max_windows = (self._off["counters"] - self._off["wring"]) // window_stride(
            self.n_phases
        )

    @classmethod
    def from_config(cls, stats: np.ndarray | WordSource, config: Mapping[str, Any]) -> StatsBlock:
        """A block described by ``Recorder.config()`` (checks the layout version)."""
        version = int(config.get("layout_version", -1))
        if version != LAYOUT_VERSION:
            raise InvalidValueError(
                f"stats block layout version {config.get('layout_version')} is not "
                f"{LAYOUT_VERSION}, the one this gyreprof reads"
            )
        return cls(stats, config["offsets"], int(config["n_phases"]))

    @classmethod
    def of(cls, rec: _RecorderLike) -> StatsBlock:
        """The live (read-only) block of a Recorder in this process."""
        return cls(rec.stats_view(), rec.offsets, rec.n_phases)

    @property
    def array(self) -> np.ndarray:
        return self._arr()

    def copy(self) -> StatsBlock:
        """A private, writable copy of the block."""
        return StatsBlock(np.array(self._a, copy=True), self._off, self.n_phases)

    def _arr(self) -> np.ndarray:
        if not isinstance(self._a, np.ndarray):
            raise ArgumentTypeError(
                "a block over a word source reads header words only; copy() it first"
            )
        return self._a

    # -- header ------------------------------------------------------------------------

    def _h(self, word: int) -> int:
        return int(self._a[word])

    @property
    def steps_begun(self) -> int:
        return self._h(_rec.H_STEP)

    @property
    def steps_completed(self) -> int:
        return self._h(_rec.H_STEPS_DONE)

    def settle_torn_steps(self) -> None:
        """In a copy taken while its writer ran, the step counters are read some words
        apart: the writer may have closed and begun steps between the two reads, so the
        completed count can pass the begun one. Raise the begun count to it (a copy)."""
        if self.steps_completed > self.steps_begun:
            self._a[_rec.H_STEP] = self.steps_completed

    @property
    def warmup_steps_done(self) -> int:
        return self._h(_rec.H_WARMUP_STEPS)

    @property
    def open_phase(self) -> int:
        """Id of the phase open now; -1 when none."""
        return self._h(_rec.H_OPEN_PHASE)

    @property
    def open_since_ns(self) -> int:
        """Time of the last boundary (lap, begin, phase entry); -1 when none."""
        return self._h(_rec.H_OPEN_SINCE)

    @property
    def step_start_ns(self) -> int:
        """When the open step began; -1 when no step is open."""
        return self._h(_rec.H_STEP_START)

    @property
    def ring_head(self) -> int:
        """Events ever written to the ring."""
        return self._h(_rec.H_RING_HEAD)

    @property
    def negative(self) -> int:
        return self._h(_rec.H_NEGATIVE)

    @property
    def out_of_range(self) -> int:
        return self._h(_rec.H_OUT_OF_RANGE)

    @property
    def nonfinite(self) -> int:
        return self._h(_rec.H_NONFINITE)

    @property
    def start_ns(self) -> int:
        """Time of the first write; 0 before it."""
        return self._h(_rec.H_START)

    @property
    def steady_start_ns(self) -> int:
        """When warm-up ended; -1 while warming up."""
        return self._h(_rec.H_STEADY_START)

    @property
    def last_step_end_ns(self) -> int:
        return self._h(_rec.H_LAST_STEP_END)

    @property
    def last_write_ns(self) -> int:
        """Last begin/end/record/timed phase (lap() moves only ``open_since_ns``)."""
        return self._h(_rec.H_LAST_WRITE)

    @property
    def last_activity_ns(self) -> int:
        """The latest of ``last_write_ns`` and ``open_since_ns``."""
        return max(self.last_write_ns, self.open_since_ns)

    @property
    def warmup_end_step(self) -> int:
        """Step number of the last warm-up step; -1 while warm-up is not over."""
        return self._h(_rec.H_WARMUP_END_STEP)

    @property
    def windows_closed(self) -> int:
        """Rolling windows closed so far (the ring keeps the last ``max_windows``)."""
        return self._h(_rec.H_WINDOWS)

    def progress(
        self, phases: Sequence[str], counter_slots: Mapping[str, int], now_ns: int
    ) -> Progress:
        """The header's progress fields and the named counters (``name -> slot``)."""
        ph = self.open_phase
        return Progress(
            step=self.steps_begun,
            steps_completed=self.steps_completed,
            phase=phases[ph] if 0 <= ph < len(phases) else None,
            phase_since_ns=self.open_since_ns,
            now_ns=int(now_ns),
            last_write_ns=self.last_write_ns,
            # word by word: a block over a live segment's words reads no region as a whole
            counters={n: self._h(self._off["counters"] + s) for n, s in counter_slots.items()},
        )

    def hide_windows(self) -> None:
        """Make the block read as if no window had closed (a writable copy only)."""
        self._arr()[_rec.H_WINDOWS] = 0

    # -- regions -----------------------------------------------------------------------

    def _hot(self) -> np.ndarray:
        start = self._off["hot"]
        return self._arr()[start : start + int(_rec.HOT_WORDS) * self.nh].reshape(
            self.nh, int(_rec.HOT_WORDS)
        )

    @property
    def stat(self) -> np.ndarray:
        """(nh, 4) steady count (not kept: see ``counts_total``), sum, min, max; a view."""
        return self._hot()[:, _rec.HOT_STAT : _rec.HOT_STAT + _rec.STAT_FIELDS]

    @property
    def first(self) -> np.ndarray:
        """(nh,) first value recorded per histogram (-1: none); a view."""
        return self._hot()[:, _rec.HOT_FIRST]

    @property
    def warm(self) -> np.ndarray:
        """(nh, 3) warm-up count, sum, max; a view."""
        start = self._off["warm"]
        f = int(_rec.WARM_FIELDS)
        return self._arr()[start : start + f * self.nh].reshape(self.nh, f)

    @property
    def counts(self) -> np.ndarray:
        """(nh, counts_len) steady histogram buckets; a view."""
        start = self._off["counts"]
        return self._arr()[start : start + self.counts_len * self.nh].reshape(
            self.nh, self.counts_len
        )

    @property
    def counters(self) -> np.ndarray:
        """(max_counters,) event counters; a view."""
        start = self._off["counters"]
        return self._arr()[start : start + self.max_counters]

    def counter(self, slot: int) -> int:
        return int(self._arr()[self._off["counters"] + slot])

    def counts_total(self) -> np.ndarray:
        """(nh,) steady counts, added up from the buckets (consistent with them)."""
        total: np.ndarray = self.counts.sum(axis=1)
        return total

    def stat_table(self) -> np.ndarray:
        """(nh, 4) copy of ``stat`` with the count column filled in from the buckets; a
        sum past the int64 range reads INT64_MAX here (``exact_sums`` has it exactly)."""
        st: np.ndarray = self.stat.copy()
        st[:, _rec.STAT_COUNT] = self.counts_total()
        for h, total in enumerate(self.exact_sums()):
            st[h, _rec.STAT_SUM] = min(total, _INT64_MAX)
        return st

    def phase_ns(self, rows: Sequence[int]) -> int:
        """The ns recorded so far in histogram rows ``rows`` (phase ids), steady and
        warm-up together (their low words: a running total read twice, a delta taken).
        A private block holds what was folded: ``Recorder.flush()`` first."""
        stat, warm = self.stat, self.warm
        return sum(int(stat[h, _rec.STAT_SUM]) + int(warm[h, _rec.WARM_SUM]) for h in rows)

    def _sum_hi(self, field: int) -> list[int]:
        if "sumhi" not in self._off:
            return [0] * self.nh
        start = self._off["sumhi"]
        f = int(_rec.SUMHI_FIELDS)
        hi = self._arr()[start : start + f * self.nh].reshape(self.nh, f)
        return [int(x) for x in hi[:, field].tolist()]

    def exact_sums(self) -> list[int]:
        """(nh,) steady sums as exact Python ints: ``hi * 2**63 + lo`` (recorder.pxd)."""
        lo = self.stat[:, _rec.STAT_SUM].tolist()
        return [h * _TWO63 + int(v) for h, v in zip(self._sum_hi(_rec.SUMHI_STAT), lo, strict=True)]

    def exact_warm_sums(self) -> list[int]:
        """(nh,) warm-up sums as exact Python ints."""
        lo = self.warm[:, _rec.WARM_SUM].tolist()
        return [h * _TWO63 + int(v) for h, v in zip(self._sum_hi(_rec.SUMHI_WARM), lo, strict=True)]

    def any_negative_sum(self) -> bool:
        """Whether a steady sum's low word, or any high word of a sum, is negative (a
        forged or corrupt block: the writer never stores one)."""
        if (self.stat[:, _rec.STAT_SUM] < 0).any():
            return True
        return any(h < 0 for f in (_rec.SUMHI_STAT, _rec.SUMHI_WARM) for h in self._sum_hi(f))

    def _set_sum(self, h: int, total: int, field: int, lo_word: np.ndarray) -> None:
        lo_word[h] = total & _INT64_MAX
        if "sumhi" in self._off:
            f = int(_rec.SUMHI_FIELDS)
            self._arr()[self._off["sumhi"] + f * h + field] = total >> 63

    def set_sum(self, h: int, total: int) -> None:
        """Write histogram ``h``'s exact steady sum (>= 0) into this block (a copy)."""
        self._set_sum(h, total, _rec.SUMHI_STAT, self.stat[:, _rec.STAT_SUM])

    def set_warm_sum(self, h: int, total: int) -> None:
        """Write histogram ``h``'s exact warm-up sum (>= 0) into this block (a copy)."""
        self._set_sum(h, total, _rec.SUMHI_WARM, self.warm[:, _rec.WARM_SUM])

    def window_records(self, *, retries: int = 1000) -> np.ndarray:
        """(closed, stride) copy of the closed-window records, oldest first.

        The writer publishes a window under a sequence word (odd while it writes).
        On a live block a copy taken while the sequence moved is taken again
        (up to ``retries`` times), so a record is not read half-written. A block
        that is itself a copy cannot be re-read: there a record caught while it
        was written (odd sequence) is left out. Either way, records that fail the
        window invariants (``0 <= p50 <= p90 <= p99 <= max``) are left out.
        """
        stride = window_stride(self.n_phases)
        K = self.max_windows
        start = self._off["wring"]
        wr: np.ndarray = self._arr()[start : start + K * stride].reshape(K, stride)
        seq_word = int(_rec.H_WIN_SEQ)
        for _ in range(max(1, retries)):
            seq = int(self._a[seq_word])
            out = self._ordered(wr, K)
            if int(self._a[seq_word]) == seq and not seq & 1:
                good: np.ndarray = out[_consistent(out, self.nh)]
                return good
            if int(self._a[seq_word]) == seq:  # odd and still: a frozen copy
                break
        closed = self.windows_closed
        if int(self._a[seq_word]) & 1 and closed >= K:
            out = out[1:]  # the slot being rewritten is the oldest
        kept: np.ndarray = out[_consistent(out, self.nh)]
        return kept

    def _ordered(self, wr: np.ndarray, K: int) -> np.ndarray:
        closed = self.windows_closed
        if closed <= K:
            kept: np.ndarray = wr[:closed].copy()
            return kept
        cut = closed % K
        return np.concatenate((wr[cut:], wr[:cut]))

    def form_events(self) -> dict[str, int]:
        """Steady phase events by the form that recorded them: ``with`` (a PhaseTimer
        used as a context manager), ``timed`` (``@timed``), ``record``; laps are the
        rest of the steady phase events (the lap path keeps no counter)."""
        timer = self._h(_rec.H_N_TIMER)
        timed = self._h(_rec.H_N_TIMED)
        return {"with": max(0, timer - timed), "timed": timed, "record": self._h(_rec.H_N_RECORD)}

    def clock_checks(self) -> dict[str, int]:
        """TSC drift checks: checks run, recalibrations, fallbacks to CLOCK_MONOTONIC,
        and the rate error the last check found (ppm)."""
        return {
            "checks": self._h(_rec.H_CLOCK_CHECKS),
            "recalibrations": self._h(_rec.H_CLOCK_RECAL),
            "fallbacks": self._h(_rec.H_CLOCK_FALLBACK),
            "error_ppm": self._h(_rec.H_CLOCK_ERROR_PPM),
        }

    @property
    def saturated(self) -> int:
        """Sums and counters that reached the int64 limit and were held there."""
        return self._h(_rec.H_SATURATED)

    def windows(self) -> list[WindowRecord]:
        """The closed rolling windows, oldest first, as named records."""
        return decode_windows(self.window_records(), self.n_phases)

    def compact(self, window_words: int) -> CompactBlock:
        """A small stats block with this one's header, hot and warm-up words, each
        histogram's total as a one-bucket row, the newest closed windows that fit in
        ``window_words`` words and the counters; the full-resolution counts rows are
        handed back as a view of this block (nothing large is copied).

        For saving a recorder quickly (autosave at exit or on SIGTERM): combine the
        small block's decoded parts with ``counts``.
        """
        a = self._arr()
        off = self._off
        nh, L = self.nh, self.counts_len
        c0 = off["counts"]
        counts = a[c0 : c0 + nh * L].reshape(nh, L)
        stride = window_stride(self.n_phases)
        closed = self.windows_closed
        have = min(closed, self.max_windows)
        keep = min(have, max(0, int(window_words)) // stride)
        K = self.max_windows
        ring = a[off["wring"] : off["wring"] + K * stride].reshape(K, stride)
        last = (closed - 1) % K  # the newest record's slot; only the kept ones are copied
        newest = ring[[(last - keep + 1 + i) % K for i in range(keep)]]
        prefix = np.array(a[:c0], dtype=np.int64)
        prefix[_rec.H_WINDOWS] = keep
        counters = np.array(a[off["counters"] : off["counters"] + self.max_counters])
        f = int(_rec.SUMHI_FIELDS)
        if "sumhi" in off:
            sumhi = np.array(a[off["sumhi"] : off["sumhi"] + f * nh])
        else:
            sumhi = np.zeros(f * nh, dtype=np.int64)
        small = np.concatenate(
            (prefix, counts.sum(axis=1).astype(np.int64), newest.reshape(-1), counters, sumhi)
        )
        # the small block's regions as the core lays them out: one bucket per histogram,
        # no window buckets, ``keep`` closed windows, the same counters
        small_off = {
            k: int(v)
            for k, v in _rec.stats_layout(self.n_phases, 1, 0, keep, self.max_counters).items()
        }
        return CompactBlock(small, small_off, counts, keep, closed, have - keep)

    def activity(self) -> int:
        """A number that changes whenever the writer records anything (steps begun
        plus events written): for telling whether a recorder was written since."""
        return self.steps_begun + self.ring_head


class CompactBlock(NamedTuple):
    """``StatsBlock.compact()``: the small block (``stats``, ``offsets``; counts_len 1,
    max_windows ``windows_kept``), the full counts rows, and the window bookkeeping."""

    stats: np.ndarray
    offsets: dict[str, int]
    counts: np.ndarray
    windows_kept: int
    windows_closed: int
    windows_dropped: int
