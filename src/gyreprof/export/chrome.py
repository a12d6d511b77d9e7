"""Chrome Trace Event JSON (loads in Perfetto and chrome://tracing) from the raw-event ring.

Every phase occurrence becomes one complete (``"ph": "X"``) event and every
step an enclosing ``"X"`` event named ``step``; the phases of a step lie inside
it, so viewers nest them under their step. Timestamps are microseconds since the
first event, written with three decimals so nanoseconds survive exactly (in any run
shorter than about ten days).
The file is written in chunks: memory stays at a small multiple of the numpy
event array (32 bytes an event), never a list of dicts for the whole ring.

Histograms do not hold individual events, so a trace needs the ring: export
from the live Profiler, or save the ring with :func:`save_events` and export
that file later (``gyreprof export run.npz --format chrome``).
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.validate import check_positive_int
from gyreprof._version import __version__
from gyreprof.model.snapshot import unix_offset_ns
from gyreprof.recording.events import NO_EVENTS, EventsFile, load_events, save_events
from gyreprof.recording.source import resolve

if TYPE_CHECKING:
    from gyreprof.recording.profiler import Profiler


def _events_of(source: Any) -> EventsFile:
    """The raw events of ``source``, resolved once (``gyreprof.recording.source.resolve``)."""
    res = resolve(source, what="chrome_trace")
    raw = res.raw
    if raw is None:
        raise InvalidValueError(
            f"a Chrome trace needs raw events; {res.origin} is a {res.given}, which holds "
            "histograms and windows, not each call. Export from the Profiler itself, or save "
            "the event ring with gyreprof.export.save_events(prof, 'run.npz') and export that "
            "file; for a trace of what a snapshot holds (its span, phase totals and windows), "
            "use gyreprof.export.windows_trace or gyreprof export FILE -f chrome --windows"
        )
    return raw


def _lines(ef: EventsFile, chunk_events: int) -> Iterator[str]:
    """The traceEvents entries, one JSON object per string, metadata first."""
    ev = ef.events
    pid = ef.pid
    tids = sorted({int(t) for t in np.unique(ef.tids)} | set(ef.thread_names))
    proc = ef.label or f"gyreprof (pid {pid})"
    yield json.dumps(
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": proc}}
    )
    for t in tids:
        name = ef.thread_names.get(t, f"gyreprof thread {t}")
        yield json.dumps(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": name}}
        )
        yield json.dumps(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": t,
                "args": {"sort_index": t},
            }
        )
    if len(ev) == 0:
        return
    valid = ev["duration_ns"] >= 0
    tid_col = ef.tids
    if not valid.all():  # the ring holds no negative durations today; stay safe, copy-free
        ev, tid_col = ev[valid], tid_col[valid]
    if len(ev) == 0:
        return
    t0 = int(ev["start_ns"].min())
    # per thread by start, the longer (enclosing) event first at equal starts
    order = np.lexsort((-ev["duration_ns"], ev["start_ns"], tid_col))
    names = [json.dumps(p) for p in ef.phases]
    step_name = json.dumps("step")
    nphase = len(names)
    for lo in range(0, len(order), chunk_events):
        idx = order[lo : lo + chunk_events]
        chunk = ev[idx]
        phases = chunk["phase"].tolist()
        steps = chunk["step"].tolist()
        # us with three decimals is exact ns: a float64 of up to ~1e15 ns / 1000 rounds back
        starts = ((chunk["start_ns"] - t0) / 1000.0).tolist()
        durs = (chunk["duration_ns"] / 1000.0).tolist()
        tcol = tid_col[idx].tolist()
        for ph, st, s, d, t in zip(phases, steps, starts, durs, tcol, strict=True):
            if ph < 0:
                name, cat = step_name, '"step"'
            elif ph < nphase:
                name, cat = names[ph], '"phase"'
            else:
                name, cat = json.dumps(f"phase {ph}"), '"phase"'
            yield (
                f'{{"name":{name},"cat":{cat},"ph":"X","pid":{pid},"tid":{t},'
                f'"ts":{s:.3f},"dur":{d:.3f},"args":{{"step":{st}}}}}'
            )
    if ef.warmup:
        for t, s in sorted(ef.steady_start_ns.items()):
            if s >= t0:
                yield json.dumps(
                    {
                        "name": "warm-up end",
                        "cat": "gyreprof",
                        "ph": "i",
                        "s": "t",
                        "pid": pid,
                        "tid": t,
                        "ts": round((s - t0) / 1000.0, 3),
                    }
                )


def _header(ef: EventsFile) -> dict[str, Any]:
    valid = ef.events["duration_ns"] >= 0
    t0 = int(ef.events["start_ns"][valid].min()) if valid.any() else 0
    other: dict[str, Any] = {
        "gyreprof": __version__,
        "phases": list(ef.phases),
        "events": int(len(ef.events)),
        "overwritten_events": ef.overwritten,
        "t0_monotonic_ns": t0,
        "clock": ef.snapshot.config.clock,
    }
    off = ef.unix_offset_ns if ef.unix_offset_ns is not None else unix_offset_ns(ef.snapshot)
    if off is not None and t0:
        other["t0_unix_ns"] = t0 + off
    if ef.overwritten:
        other["note"] = (
            f"the ring had wrapped: the {ef.overwritten} oldest events are not in this trace "
            "(histograms still count them); raise Profiler(capacity=...) to keep more"
        )
    return other


def chrome_trace(
    source: Profiler | EventsFile | str | os.PathLike[str],
    path: str | os.PathLike[str] | IO[str] | None = None,
    *,
    chunk_events: int = 16384,
) -> Path | str | None:
    """Write the raw events as Chrome Trace Event JSON (Perfetto, chrome://tracing).

    ``source``: a Profiler, an :class:`EventsFile`, or the path of a file from
    :func:`save_events`. ``path``: file to write (returned as a Path), an open
    text stream (returns None), or None to return the JSON text itself.
    Raises ValueError when the ring is empty or the source has no raw events.
    """
    ef = _events_of(source)
    check_positive_int("chunk_events", chunk_events)
    if len(ef.events) == 0:
        raise InvalidValueError(NO_EVENTS)
    if path is None:
        buf = io.StringIO()
        _write(ef, buf, chunk_events)
        return buf.getvalue()
    if hasattr(path, "write"):
        _write(ef, path, chunk_events)  # type: ignore[arg-type]
        return None
    from gyreprof._support.io import atomic_open

    p = Path(path)  # type: ignore[arg-type]
    with atomic_open(p, "w") as fh:
        _write(ef, fh, chunk_events)
    return p


def _write(ef: EventsFile, fh: IO[str], chunk_events: int) -> None:
    head = json.dumps({"displayTimeUnit": "ns", "otherData": _header(ef)})
    fh.write(head[:-1] + ',"traceEvents":[\n')
    batch: list[str] = []
    first = True
    for line in _lines(ef, chunk_events):
        batch.append(line)
        if len(batch) >= chunk_events:
            fh.write(("" if first else ",\n") + ",\n".join(batch))
            first = False
            batch.clear()
    if batch:
        fh.write(("" if first else ",\n") + ",\n".join(batch))
    fh.write("\n]}\n")


# ------------------------------------------------------- a saved run's snapshots

#: the thread (track) of each side of a ``gyreprof run`` process in a windows trace
_SIDE_TIDS = {"sampler": 1, "trainer": 2}


def _ms(ns: float) -> float | None:
    return round(ns / 1e6, 6) if math.isfinite(ns) else None


def _window_lines(tracks: Sequence[tuple[str, int, str, Any]]) -> Iterator[str]:
    """traceEvents of snapshots, which hold histograms and windows, not raw events: per
    process and side a track with the profile's span (its phase totals and shares as
    args), each closed window as a span inside it (steps, per-phase count, mean, p50 and
    p99) and a counter of each phase's mean per window."""
    starts = [int(s.times.start_ns) for *_, s in tracks if s.times.start_ns > 0]
    t0 = min(starts) if starts else 0
    named: set[int] = set()
    for who, pid, side, snap in tracks:
        tid = _SIDE_TIDS.get(side, 3)
        if pid not in named:
            named.add(pid)
            yield json.dumps(
                {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": who}}
            )
        yield json.dumps(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": side}}
        )
        s = snap.summary()
        begin = max(0, int(snap.times.start_ns) - t0) if snap.times.start_ns > 0 else 0
        span = max(0.0, s.elapsed_s * 1e6)
        phases = {
            n: {"count": st.count, "total_ms": _ms(float(st.sum_ns))}
            for n, st in s.phases.items()
            if st.count
        }
        yield json.dumps(
            {
                "name": f"{side} profile",
                "cat": "profile",
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "ts": round(begin / 1000.0, 3),
                "dur": round(span, 3),
                "args": {"steps": s.steps, "events": s.events, "phases": phases},
            },
            allow_nan=False,
        )
        for w in snap.windows() or []:
            ts = max(0, int(w.start_ns) - t0) / 1000.0
            dur = max(0, int(w.end_ns) - int(w.start_ns)) / 1000.0
            stats = {
                n: {
                    "count": x.count,
                    "mean_ms": _ms(x.mean),
                    "p50_ms": _ms(x.p50),
                    "p99_ms": _ms(x.p99),
                }
                for n, x in w.phases.items()
                if x.count
            }
            yield json.dumps(
                {
                    "name": f"window {w.index}" + (" (warm-up)" if w.warmup else ""),
                    "cat": "window",
                    "ph": "X",
                    "pid": pid,
                    "tid": tid,
                    "ts": round(ts, 3),
                    "dur": round(dur, 3),
                    "args": {"first_step": w.first_step, "steps": w.steps, "phases": stats},
                },
                allow_nan=False,
            )
            means = {n: v["mean_ms"] for n, v in stats.items() if v["mean_ms"] is not None}
            if means:
                yield json.dumps(
                    {
                        "name": f"{side} phase mean (ms)",
                        "ph": "C",
                        "pid": pid,
                        "tid": tid,
                        "ts": round(ts, 3),
                        "args": means,
                    },
                    allow_nan=False,
                )


def windows_trace(
    tracks: Sequence[tuple[str, int, str, Any]],
    path: str | os.PathLike[str] | IO[str] | None = None,
) -> Path | str | None:
    """Chrome Trace Event JSON (Perfetto, chrome://tracing) of snapshots, such as the
    ones a ``gyreprof run --save`` folder keeps: ``tracks`` are ``(process name, pid,
    side, Snapshot)``. A snapshot holds no raw events, so the trace shows what it does
    hold: each profile's span with its phase totals, its closed windows as spans with
    their per-phase figures, and each phase's mean per window as a counter (a trace of
    every phase call needs the raw events: ``gyreprof.export.save_events``).
    ``path`` as :func:`chrome_trace`'s."""
    if not tracks:
        raise InvalidValueError("no snapshot to put in a trace")
    head = json.dumps(
        {"displayTimeUnit": "ms", "otherData": {"gyreprof": "snapshot windows and totals"}}
    )
    text = head[:-1] + ',"traceEvents":[\n' + ",\n".join(_window_lines(tracks)) + "\n]}\n"
    if path is None:
        return text
    if hasattr(path, "write"):
        path.write(text)  # type: ignore[union-attr]
        return None
    from gyreprof._support.io import write_atomic

    p = Path(path)  # type: ignore[arg-type]
    write_atomic(p, text.encode("utf-8"))
    return p


def validate_trace(doc: dict[str, Any], phases: Sequence[str] | None = None) -> list[str]:
    """Problems found in a loaded Chrome trace (empty list: fine). Used by tests and users.

    Checks the event fields, that every ``X`` event of a phase lies inside the
    ``step`` event of the same thread and step number, and phase names.
    """
    problems: list[str] = []
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"]
    steps: dict[tuple[Any, Any, Any], tuple[float, float]] = {}
    xs = []
    for e in events:
        for k in ("name", "ph", "pid", "tid"):
            if k not in e:
                problems.append(f"event without {k!r}: {e}")
        if e.get("ph") == "X":
            if not isinstance(e.get("ts"), (int, float)) or not isinstance(
                e.get("dur"), (int, float)
            ):
                problems.append(f"X event without numeric ts/dur: {e}")
                continue
            if e["dur"] < 0:
                problems.append(f"negative duration: {e}")
            key = (e["pid"], e["tid"], e.get("args", {}).get("step"))
            if e.get("cat") == "step":
                steps[key] = (e["ts"], e["ts"] + e["dur"])
            else:
                xs.append((key, e))
    for key, e in xs:
        if phases is not None and e["name"] not in phases:
            problems.append(f"unknown phase name {e['name']!r}")
        enc = steps.get(key)
        if enc is None:
            continue
        if e["ts"] < enc[0] - 1e-6 or e["ts"] + e["dur"] > enc[1] + 1e-6:
            problems.append(f"phase event outside its step: {e} not in {enc}")
    return problems


__all__ = [
    "EventsFile",
    "chrome_trace",
    "load_events",
    "save_events",
    "validate_trace",
    "windows_trace",
]
