"""Where the untimed time went: code sites from stack samples (issue 38).

Under ``gyreprof run`` a low-rate stack sampler in every instrumented process
(``integrations/_auto/stacks.py``) looks at each recording thread now and then and
sorts the sample by what the thread's timeline says of that moment:

- inside the sampler's wall time (a collect block of a training thread, or a worker's
  loop between its first and last sampler write): counted in ``sampler_samples``, and
  when no timed phase was open, charged to a site in ``sampler``;
- inside a trainer step's ``compute``: counted in ``compute_samples`` and charged to a
  site in ``compute``.

A *site* is the innermost frame of the user's code in the thread's stack (not the
standard library's, not an installed package's unless the whole stack is; never
gyreprof's), rolled up per function: its name, file and first line.

:class:`ProcessSites` is what one process leaves (``<pid>.sites.json``, a declared
record with a version); :func:`merge` adds several; :func:`sampler_rows` and
:func:`rows` turn the counts into the verdict's ``sampler_sites`` / ``compute_sites``
(shares of the sampler's, respectively the compute's, wall time; the sampler's sum held
within its untimed share), and the words here name them. ``diagnose`` takes them in its
``sites`` option (``analysis.verdict``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import fmt_pct, safe_name
from gyreprof.model._serial import Record, loads, serial_format

SITES_FORMAT = "gyreprof.sites/1"
#: a share resting on fewer samples than this is hedged in the words
FEW_SAMPLES = 20
#: at most this many sites per list in the verdict
MAX_SITES = 10
#: a site below this share is left out of the verdict's lists
MIN_SHARE = 0.005
#: a list resting on fewer samples in all gets no line of the report (it stays in the
#: verdict's JSON): one sample of a short run says nothing about where time went
MIN_LINE_SAMPLES = 3
#: the sampler's sites get a line where its untimed share is at least this (below, the
#: verdict's own untimed figure says all there is to say)
MIN_UNTIMED_LINE = 0.05


@dataclass(frozen=True)
class SiteCount(Record):
    """One function's samples: its name (qualified), file and first line."""

    function: str
    file: str
    line: int
    samples: int

    def __post_init__(self) -> None:
        if self.samples < 0 or self.line < 0:
            raise InvalidValueError(
                f"a site's samples and line are >= 0, got {self.samples} and {self.line}"
            )


@serial_format(SITES_FORMAT)
@dataclass(frozen=True)
class ProcessSites(Record):
    """The stack samples of one process (or several, merged).

    ``hz``: the sampler's rate. ``sampler_samples``: samples inside the sampler's wall
    time (timed or not); ``sampler``: the untimed ones, by site. ``compute_samples``:
    samples inside the trainer's compute, all of them by site in ``compute``."""

    pid: int
    hz: float
    sampler_samples: int = 0
    compute_samples: int = 0
    sampler: list[SiteCount] = field(default_factory=list)
    compute: list[SiteCount] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.sampler_samples < 0 or self.compute_samples < 0:
            raise InvalidValueError("sampler_samples and compute_samples are counts >= 0")
        if sum(s.samples for s in self.sampler) > self.sampler_samples:
            raise InvalidValueError("sampler: more site samples than sampler_samples")
        if sum(s.samples for s in self.compute) > self.compute_samples:
            raise InvalidValueError("compute: more site samples than compute_samples")

    @classmethod
    def from_json(cls, text: str | bytes) -> ProcessSites:
        """Parse a record; ValueError for anything that is not one."""
        return loads(cls, text)


def _added(lists: list[list[SiteCount]]) -> list[SiteCount]:
    counts: dict[tuple[str, str, int], int] = {}
    for sites in lists:
        for s in sites:
            key = (s.function, s.file, s.line)
            counts[key] = counts.get(key, 0) + s.samples
    out = [SiteCount(f, p, ln, n) for (f, p, ln), n in counts.items()]
    out.sort(key=lambda s: (-s.samples, s.function, s.file, s.line))
    return out


def merge(records: list[ProcessSites]) -> ProcessSites | None:
    """The samples of several processes added (None for none)."""
    records = [r for r in records if r is not None]
    if not records:
        return None
    if len(records) == 1:
        return records[0]
    return ProcessSites(
        pid=records[0].pid,
        hz=max(r.hz for r in records),
        sampler_samples=sum(r.sampler_samples for r in records),
        compute_samples=sum(r.compute_samples for r in records),
        sampler=_added([r.sampler for r in records]),
        compute=_added([r.compute for r in records]),
    )


def rows(sites: list[SiteCount], total: int, scale: float = 1.0) -> list[dict[str, Any]]:
    """The verdict's list: ``{function, file, line, share, samples}`` by share, largest
    first; a share is the site's samples over ``total``, times ``scale``."""
    if total <= 0 or not sites:
        return []
    out: list[dict[str, Any]] = [
        {
            "function": s.function,
            "file": s.file,
            "line": s.line,
            "share": min(1.0, s.samples / total) * scale,
            "samples": s.samples,
        }
        for s in sorted(sites, key=lambda s: (-s.samples, s.function, s.file, s.line))
    ]
    return [r for r in out if r["share"] >= MIN_SHARE][:MAX_SITES]


def sampler_rows(sites: ProcessSites, untimed: float) -> list[dict[str, Any]]:
    """The sampler's sites as shares of its wall time: each site's part of the untimed
    samples times the untimed share the phases left (``untimed``), so they add up to
    at most that share. The phases' own clock says how much was untimed; the stack
    samples only say where it went. (A sample is taken when the sampler thread gets
    the GIL, which a thread releasing it, in an env reset or a pipe read, hands over at
    once: samples crowd into such calls. They are timed phases mostly, so the timed
    samples are left out of the shares rather than trusted for the split.)"""
    return rows(sites.sampler, sum(s.samples for s in sites.sampler), max(0.0, untimed))


def where(row: dict[str, Any]) -> str:
    """``featurize (train.py:14)``: the function and where it is defined."""
    name = safe_name(os.path.basename(row["file"]))
    return f"{safe_name(row['function'])} ({name}:{row['line']})"


def share_words(row: dict[str, Any]) -> str:
    """The site's share, hedged when it rests on few samples."""
    n = int(row["samples"])
    if n < FEW_SAMPLES:
        return f"~{fmt_pct(row['share'])} ({n} sample{'' if n == 1 else 's'}, a rough figure)"
    return fmt_pct(row["share"])


def listing(found: list[dict[str, Any]], most: int = 4) -> str:
    """``featurize (train.py:14) 48%, sample (train.py:31) 3%, ...``"""
    text = ", ".join(f"{where(r)} {share_words(r)}" for r in found[:most])
    return text + (", ..." if len(found) > most else "")


def _samples(found: list[dict[str, Any]]) -> int:
    return sum(int(r["samples"]) for r in found)


def sampler_line(untimed: float | None, found: list[dict[str, Any]]) -> str | None:
    """The sampler's line: ``untimed 52%: featurize (train.py:14) 48%, ...``, from its
    untimed share and its sites (None without sites, with too few samples to tell, or
    with an untimed share below :data:`MIN_UNTIMED_LINE`)."""
    if _samples(found) < MIN_LINE_SAMPLES or (untimed is not None and untimed < MIN_UNTIMED_LINE):
        return None
    head = f"untimed {fmt_pct(untimed)}" if untimed is not None else "untimed"
    return f"sampler: {head}: {listing(found)} (from stack samples)"


def compute_line(found: list[dict[str, Any]]) -> str | None:
    """The trainer's compute by site: ``compute: update (train.py:40) 61%, ...`` (None
    without sites, or with too few samples to tell)."""
    if _samples(found) < MIN_LINE_SAMPLES:
        return None
    return (
        f"trainer: compute by site (share of its wall time): {listing(found)} (from stack samples)"
    )


def sampler_advice(row: dict[str, Any]) -> str:
    """The first advice where the sampler's untimed time leads: its largest site."""
    return (
        f"look first at {where(row)}: {share_words(row)} of the sampler's wall time went "
        "there, outside the timed phases (stack samples); speed it up, batch it, or move "
        "it out of the loop"
    )


def compute_advice(row: dict[str, Any]) -> str:
    """The first advice where the trainer's compute holds training back: its largest site."""
    return (
        f"look first at {where(row)}: {share_words(row)} of the trainer's compute went "
        "there (stack samples)"
    )
