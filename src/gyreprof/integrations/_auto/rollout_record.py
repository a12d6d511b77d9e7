"""One process's HTTP rollout requests as a file: ``<pid>.rollouts.json`` in the run folder.

Format ``gyreprof.rollout-record/1`` (``gyreprof._serial``): the pid, the kept spans
as rows (the columns are ``analysis.rollouts.SPAN_FIELDS``, named once in the
record's ``fields``), the totals of folded requests per endpoint, each
thread's in-flight gauge from the core, and the groups of requests waited on
together (``[rule, start, end, awaited, [thread, ...]]``, the batches). Written atomically at the process's save;
read back with a size cap, every row checked: anything else is a
``CorruptDataError`` (a ``ValueError``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyreprof._errors import CorruptDataError
from gyreprof._serial import serial_format
from gyreprof.analysis import rollouts as ar
from gyreprof.integrations._auto import rollout_log as rl

FORMAT = "gyreprof.rollout-record/1"
MAX_RECORD_BYTES = 64 << 20
_TYPES: dict[str, tuple[type, ...]] = {
    "endpoint": (str,),
    "start": (int,),
    "end": (int,),
    "outcome": (str,),
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "ttft": (int,),
    "chunks": (int,),
    "attempts": (int,),
    "retried": (list,),
    "bytes_in": (int,),
    "bytes_out": (int,),
    "stream": (bool,),
    "empty_field": (str, type(None)),
    "body_flag": (int,),
    "thread": (int,),
    "client": (str,),
}


@serial_format(FORMAT)
@dataclass(frozen=True)
class RolloutRecord:
    """What one process leaves of its rollout requests."""

    pid: int
    fields: list[str]
    spans: list[list[Any]]
    folded: dict[str, ar.Totals] = field(default_factory=dict)
    gauges: list[dict[str, float]] = field(default_factory=list)
    groups: list[list[Any]] = field(default_factory=list)

    def group_rows(self) -> list[ar.Group]:
        """The groups, each checked (``CorruptDataError`` naming the bad one)."""
        out = []
        for i, g in enumerate(self.groups):
            ok = isinstance(g, list) and len(g) == 5 and isinstance(g[0], str) and len(g[0]) < 64
            ok = ok and all(isinstance(v, int) and not isinstance(v, bool) for v in g[1:4])
            ok = ok and isinstance(g[4], list) and len(g[4]) <= 4096
            ok = ok and all(isinstance(v, int) and not isinstance(v, bool) for v in g[4])
            if not ok or g[2] < g[1]:
                raise CorruptDataError(f"rollout record group {i}: malformed {g!r:.60}")
            out.append(ar.Group(g[0], self.pid, g[1], g[2], g[3], tuple(g[4])))
        return out

    def rows(self) -> list[ar.SpanRow]:
        """The spans, each row checked (``CorruptDataError`` naming the bad one)."""
        if tuple(self.fields) != ar.SPAN_FIELDS:
            raise CorruptDataError(f"rollout record columns {self.fields[:20]} are not known")
        out = []
        for i, row in enumerate(self.spans):
            if len(row) != len(ar.SPAN_FIELDS):
                raise CorruptDataError(f"rollout record span {i}: {len(row)} columns")
            for name, v in zip(ar.SPAN_FIELDS, row, strict=True):
                ok = _TYPES[name]
                if not isinstance(v, ok) or (bool not in ok and isinstance(v, bool)):
                    raise CorruptDataError(f"rollout record span {i}: bad {name} {v!r:.40}")
            d = dict(zip(ar.SPAN_FIELDS, row, strict=True))
            if d["outcome"] not in ar.OUTCOMES or d["end"] < d["start"]:
                raise CorruptDataError(f"rollout record span {i}: bad outcome or times")
            if not all(isinstance(r, str) and r in ar.OUTCOMES for r in d["retried"]):
                raise CorruptDataError(f"rollout record span {i}: bad retried classes")
            d["retried"] = tuple(d["retried"])
            out.append(ar.SpanRow(**d, pid=self.pid))
        return out

    def to_json(self) -> str:
        from gyreprof._serial import dumps

        return dumps(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> RolloutRecord:
        from gyreprof._serial import loads

        try:
            return loads(cls, text)
        except ValueError:
            raise
        except (RecursionError, OverflowError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptDataError(f"malformed rollout record: {type(exc).__name__}") from None


def _row(s: rl.Request | rl.Row) -> list[Any]:
    row = list(rl.as_row(s))
    row[rl.R_RETRIED] = list(row[rl.R_RETRIED])
    return row


def from_logs(logs: list[rl.ThreadLog], pid: int | None = None) -> RolloutRecord | None:
    """This process's record from its threads' logs; None when no request was made."""
    spans: list[list[Any]] = []
    folded: dict[str, ar.Totals] = {}
    gauges: list[dict[str, float]] = []
    for log in logs:
        spans.extend(_row(s) for s in list(log.spans))
        for ep, t in list(log.folded.items()):
            folded.setdefault(ep, ar.Totals()).add(t)
        if log.core_ok:
            try:
                g = log.spans_core.gauge()
                gauges.append({k: float(v) for k, v in g.items()})
            except Exception:  # noqa: BLE001, S112 - a gauge is a detail
                continue
    if not spans and not folded:
        return None
    groups = [[r, a, b, n, list(th)] for r, a, b, n, th in rl.groups()]
    return RolloutRecord(
        pid=os.getpid() if pid is None else pid,
        fields=list(ar.SPAN_FIELDS),
        spans=spans,
        folded=folded,
        gauges=gauges,
        groups=groups,
    )


def save(run_dir: Path, key: int | str) -> Path | None:
    """Write this process's record into the run folder (atomically); its path or None."""
    from gyreprof._io import write_atomic
    from gyreprof.integrations._auto import records as rec

    record = from_logs(rl.logs())
    if record is None:
        return None
    path = rec.rollouts_path(run_dir, key)
    write_atomic(path, record.to_json().encode())
    return path


def read(path: Path) -> RolloutRecord:
    """The record in ``path``: OSError, or ``CorruptDataError`` for anything else."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptDataError(f"{path}: not a regular file, not a rollout record")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_RECORD_BYTES:
        raise CorruptDataError(f"{path}: larger than {MAX_RECORD_BYTES} bytes")
    record = RolloutRecord.from_json(data)
    record.rows()  # every row checked here, once
    record.group_rows()
    return record


def report(records: list[RolloutRecord]) -> ar.RolloutReport | None:
    """The rollout report of these processes' records."""
    rows: list[ar.SpanRow] = []
    folded: dict[str, ar.Totals] = {}
    groups: list[ar.Group] = []
    for r in records:
        rows.extend(r.rows())
        groups.extend(r.group_rows())
        for ep, t in r.folded.items():
            folded.setdefault(ep, ar.Totals()).add(t)
    return ar.analyse(rows, folded, groups)
