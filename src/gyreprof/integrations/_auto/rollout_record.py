"""One process's HTTP rollout requests as a file: ``<pid>.rollouts.json`` in the run folder.

Format ``gyreprof.rollout-record/1`` (``gyreprof.model._serial``): the pid, the kept spans
as rows (the columns are ``analysis.rollouts.SPAN_FIELDS``, named once in the
record's ``fields``), the totals of folded requests per endpoint, each
thread's in-flight gauge from the core, and the groups of requests waited on
together (``[rule, start, end, awaited, [thread, ...]]``, the batches). Written atomically at the process's save;
read back with a size cap, every row checked: anything else is a
``CorruptDataError`` (a ``ValueError``).

**Flushed records.** A process killed before it saves (SIGKILL, the OOM killer) would
lose its requests: they have no live segment. Under ``gyreprof run`` a daemon thread,
started at the process's first request, writes the same record every ``FLUSH_S``
seconds (``GYREPROF_ROLLOUT_FLUSH_S``; 0 turns it off) to ``<pid>.rollouts.part.json``
through the atomic writer, when requests finished since the last flush. Each flush's
own CPU time stretches the interval so that flushing takes at most ``FLUSH_SHARE`` of
one core. The save at exit writes the whole record and removes the flushed one; the
run's report reads a flushed record only for a process that left no whole one, and
says so.

**A ``--save`` folder** keeps the run's rollout report itself (``rollouts.json``,
format ``gyreprof.rollouts/1``): ``gyreprof report DIR`` shows the same section.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyreprof._support.errors import CorruptDataError
from gyreprof.analysis import rollouts as ar
from gyreprof.analysis import server_metrics as sm
from gyreprof.integrations._auto import rollout_log as rl
from gyreprof.model._serial import serial_format

FORMAT = "gyreprof.rollout-record/1"
MAX_RECORD_BYTES = 64 << 20
#: span rows encoded per ``json.dumps`` call (about 1 ms each)
ROWS_PER_BLOCK = 512
#: a flushed record of a process that may be killed before it saves (``<pid>`` + this)
PART_SUFFIX = ".rollouts.part.json"
ENV_FLUSH_S = "GYREPROF_ROLLOUT_FLUSH_S"
FLUSH_S = 2.0
#: at most this share of one core goes to flushing (the interval grows to keep it)
FLUSH_SHARE = 0.02
#: the rollout report a ``gyreprof run --save DIR`` folder keeps
FOLDER_FILE = "rollouts.json"
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
    #: the rollout servers' metrics pages as this process read them
    servers: list[sm.ServerSeries] = field(default_factory=list)
    #: per endpoint, the totals of its answers' per-request ``metrics`` objects
    #: (``rollout_log.ThreadLog.answer_metrics``)
    answer_metrics: dict[str, list[float]] = field(default_factory=dict)

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
        """The record as ``_serial`` writes it; the span rows (plain JSON values) go to
        ``json`` by blocks of ``ROWS_PER_BLOCK``, not value by value: 5x faster for 16k
        spans, and the GIL is free between blocks (the user's threads go on)."""
        import dataclasses

        rows = self.spans
        blocks = [
            json.dumps(rows[i : i + ROWS_PER_BLOCK], separators=(",", ":"), allow_nan=False)[1:-1]
            for i in range(0, len(rows), ROWS_PER_BLOCK)
        ]
        return _with_blocks(dataclasses.replace(self, spans=[]), [b for b in blocks if b])

    @classmethod
    def from_json(cls, text: str | bytes) -> RolloutRecord:
        from gyreprof.model._serial import loads

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
        servers=_server_series(),
        answer_metrics=_answer_metrics(logs),
    )


def _answer_metrics(logs: list[rl.ThreadLog]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for log in logs:
        for ep, t in list(log.answer_metrics.items()):
            mine = out.setdefault(ep, [0.0] * 5)
            for i, v in enumerate(t[:5]):
                mine[i] += v
    return out


def _server_series() -> list[sm.ServerSeries]:
    from gyreprof.integrations.http import server_metrics

    try:
        return server_metrics.series()
    except Exception:  # noqa: BLE001 - the requests are kept without them
        return []


def save(run_dir: Path, key: int | str) -> Path | None:
    """Write this process's record into the run folder (atomically); its path or None."""
    from gyreprof._support.io import write_atomic
    from gyreprof.integrations._auto import records as rec
    from gyreprof.integrations.http import server_metrics

    try:  # the run's end: the servers' pages read once more (not under the flush lock)
        server_metrics.final_reads()
    except Exception:  # noqa: BLE001, S110 - the record is saved without that read
        pass
    with _flush_lock:  # a flush in progress ends first; none starts after this save
        record = from_logs(rl.logs())
        if record is None:
            return None
        path = rec.rollouts_path(run_dir, key)
        write_atomic(path, record.to_json().encode())
        try:  # the whole record replaces the flushed one (kept if this failed)
            os.unlink(part_path(run_dir, os.getpid()))
        except OSError:
            pass
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
    # cloud metadata probes (Ray's start-up) are never a rollout endpoint: one note
    rows, folded, probes = ar.without_metadata_probes(rows, folded)
    out = ar.analyse(rows, folded, groups)
    if out is not None and probes is not None:
        out.notes.append(probes)
    if out is not None:
        answers: dict[str, list[float]] = {}
        for r in records:
            for name, totals in r.answer_metrics.items():
                if isinstance(totals, list) and len(totals) == 5:
                    mine = answers.setdefault(name, [0.0] * 5)
                    for i, v in enumerate(totals):
                        mine[i] += float(v)
        out = with_servers(out, rows, [s for r in records for s in r.servers], answers)
    return out


def with_servers(
    out: ar.RolloutReport,
    rows: list[ar.SpanRow],
    series: list[sm.ServerSeries],
    answers: dict[str, list[float]] | None = None,
) -> ar.RolloutReport:
    """``out`` with each generation endpoint's server figures (``EndpointReport.server``)
    from the metrics pages the processes read (one page's reads merged over them) and
    the per-request ``metrics`` of its answers (``answers``, per endpoint)."""
    import dataclasses

    answers = answers or {}
    by_url: dict[str, list[sm.ServerSeries]] = {}
    for s in series:
        by_url.setdefault(s.url, []).append(s)
    pages = [sm.merged(group) for group in by_url.values()]
    if not pages and not answers:
        return out
    first_end: dict[str, int] = {}
    for r in rows:
        if r.endpoint not in first_end or r.end < first_end[r.endpoint]:
            first_end[r.endpoint] = r.end
    generation = {e.endpoint for e in ar.generation_endpoints(out.endpoints)}
    endpoints = []
    for e in out.endpoints:
        base = e.endpoint.split("://", 1)
        key = f"{base[0]}://{base[1].split('/', 1)[0]}" if len(base) == 2 else ""
        page = next((p for p in pages if key in p.endpoints), None)
        if e.endpoint in generation and (page is not None or e.endpoint in answers):
            if page is None:
                server = sm.ServerReport(
                    url="", source=None, reads=0, none="no metrics page was read"
                )
            else:
                server = sm.report(page, first_end.get(e.endpoint))
            server = sm.with_answers(server, answers.get(e.endpoint))
            e = dataclasses.replace(e, server=server)
        endpoints.append(e)
    return dataclasses.replace(out, endpoints=endpoints)


# ------------------------------------------------------------ flushed records

_flush_lock = threading.RLock()  # re-entrant: a SIGTERM save may interrupt its holder
_flusher_pid = 0


def part_path(run_dir: Path, pid: int | str) -> Path:
    return run_dir / f"{pid}{PART_SUFFIX}"


def flush_interval() -> float:
    """``GYREPROF_ROLLOUT_FLUSH_S`` (seconds between flushes; 0: none), else ``FLUSH_S``."""
    raw = os.environ.get(ENV_FLUSH_S, "").strip()
    if not raw:
        return FLUSH_S
    try:
        value = float(raw)
    except ValueError:
        return FLUSH_S
    return value if value == value and value < 1e6 else FLUSH_S  # NaN, inf: the default


def start_flusher(run_dir: Path, saved_pid: Callable[[], int]) -> bool:
    """Start this process's flusher thread (once per process; a forked child starts its
    own at its first request); False when flushing is off or already running.
    ``saved_pid()``: the pid of the process that saved (``state._saved_pid``); once it is
    this one's (its whole record is written or being written), the flushes stop."""
    global _flusher_pid
    pid = os.getpid()
    interval = flush_interval()
    if _flusher_pid == pid or interval <= 0:
        return False
    from gyreprof._support.io import write_atomic  # not in the thread (see _autosave's helper)

    _flusher_pid = pid

    def saved() -> bool:
        return bool(saved_pid() == pid)

    try:
        threading.Thread(
            target=_flush_loop,
            args=(run_dir, pid, interval, saved, write_atomic),
            name="gyreprof-rollout-flush",
            daemon=True,
        ).start()
    except RuntimeError:  # the interpreter is shutting down
        return False
    return True


#: a full block of span rows encoded by an earlier flush: (its first row, its last row,
#: the rows as JSON without the brackets), by ``id`` of its first row
BlockCache = dict[int, tuple[Any, Any, str]]


def _span_blocks(logs: list[rl.ThreadLog], cache: BlockCache) -> tuple[list[str], BlockCache]:
    """The span rows of ``logs`` as JSON blocks of ``ROWS_PER_BLOCK``, each full block
    encoded once over the flushes: a thread log only appends, and drops its oldest rows
    by a multiple of the block size, so its blocks stay aligned from its start; a cached
    block is reused only if its first and last rows are the very ones found there. The
    rows of a request whose body is read late (urllib, aiohttp) are as they were when
    their block filled: a flushed record is the state of a recent moment, no more."""
    out: list[str] = []
    kept: BlockCache = {}
    for log in logs:
        rows = list(log.spans)  # one copy: the writer's appends and cuts are atomic
        for i in range(0, len(rows), ROWS_PER_BLOCK):
            block = rows[i : i + ROWS_PER_BLOCK]
            first, last = block[0], block[-1]
            hit = cache.get(id(first)) if len(block) == ROWS_PER_BLOCK else None
            if hit is not None and hit[0] is first and hit[1] is last:
                text = hit[2]
            else:
                text = json.dumps([rl.as_row(r) for r in block], separators=(",", ":"))[1:-1]
            if len(block) == ROWS_PER_BLOCK:
                kept[id(first)] = (first, last, text)
            if text:
                out.append(text)
    return out, kept


def encode_flush(logs: list[rl.ThreadLog], pid: int, cache: BlockCache) -> tuple[str, BlockCache]:
    """The record of ``logs`` as JSON (``""`` when no request was made), its span rows
    from the block cache, and the cache for the next flush."""
    blocks, kept = _span_blocks(logs, cache)
    folded: dict[str, ar.Totals] = {}
    for log in logs:
        for ep, t in list(log.folded.items()):
            folded.setdefault(ep, ar.Totals()).add(t)
    if not blocks and not folded:
        return "", kept
    groups = [[r, a, b, n, list(th)] for r, a, b, n, th in rl.groups()]
    head = RolloutRecord(
        pid=pid,
        fields=list(ar.SPAN_FIELDS),
        spans=[],
        folded=folded,
        groups=groups,
        servers=_server_series(),
        answer_metrics=_answer_metrics(logs),
    )
    return _with_blocks(head, blocks), kept


def _with_blocks(head: RolloutRecord, blocks: list[str]) -> str:
    """``head`` (its spans empty) as JSON, with ``blocks`` as its span rows."""
    from gyreprof.model._serial import encode

    data = encode(head)
    del data["spans"]
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text[:-1] + ',"spans":[' + ",".join(blocks) + "]}"


def flush(
    run_dir: Path,
    pid: int,
    saved: Callable[[], bool],
    write: Callable[[Path, bytes], None],
    cache: BlockCache | None = None,
) -> BlockCache | None:
    """Write this process's record as its flushed one; the block cache for the next
    flush, or None once the process saved (no flush after that)."""
    logs = rl.logs()  # its lock is not taken under the flush lock (a save takes both)
    with _flush_lock:
        if saved() or not run_dir.is_dir():  # the run is over: its folder is not remade
            return None
        text, kept = encode_flush(logs, pid, cache or {})
        if text:
            write(part_path(run_dir, pid), text.encode())
    return kept


def _flush_loop(
    run_dir: Path,
    pid: int,
    interval: float,
    saved: Callable[[], bool],
    write: Callable[[Path, bytes], None],
) -> None:
    last = -1
    wait = interval
    cache: BlockCache = {}
    while True:
        time.sleep(wait)
        if os.getpid() != pid:
            return
        try:
            done = sum(len(log.spans) + log.dropped for log in rl.logs())
            if done == last:
                continue  # nothing finished since the last flush
            cpu = time.thread_time()
            kept = flush(run_dir, pid, saved, write, cache)
            if kept is None:
                return
            cache, last = kept, done
            wait = max(interval, (time.thread_time() - cpu) / FLUSH_SHARE)
        except Exception:  # noqa: BLE001, S112 - a full disk now may not be full later
            wait = max(wait, interval)
            continue


def flushed(run_dir: Path, notes: list[str]) -> list[RolloutRecord]:
    """The flushed records of the processes that left no whole one (killed before they
    saved), each with a note saying so; a bad one is skipped with a note."""
    from gyreprof.integrations._auto import records as rec

    out: list[RolloutRecord] = []
    for p in sorted(run_dir.glob("*" + PART_SUFFIX)):
        key = p.name[: -len(PART_SUFFIX)]
        if not key.isdigit() or rec.rollouts_path(run_dir, key).exists():
            continue
        try:
            record = read(p)
        except (OSError, ValueError) as exc:
            notes.append(f"skipped {p.name}: {str(exc)[:200]}")
            continue
        out.append(record)
        n = len(record.spans) + sum(t.requests for t in record.folded.values())
        how = "was killed before it saved (or its save failed)"
        if _alive(int(key)):
            how = "had not saved when the run was collected (it still runs)"
        notes.append(
            f"pid {key} {how}: its {n} rollout request(s) are those of its last flush "
            f"(every {flush_interval():g} s or so), not the ones after it"
        )
    return out


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        pass  # another user's process (EPERM): it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read(4096)
    except OSError:
        return True  # no /proc (macOS): as kill said
    state = stat_line.rpartition(b")")[2].split()[:1]
    return state not in ([b"Z"], [b"X"])


def _after_fork_in_child() -> None:
    global _flush_lock
    _flush_lock = threading.RLock()  # a flush of the parent's thread does not go on here


os.register_at_fork(after_in_child=_after_fork_in_child)


# ------------------------------------------------------------ a --save folder


def save_report(report: ar.RolloutReport, directory: Path) -> Path:
    """The run's rollout report into a ``--save`` folder (``rollouts.json``)."""
    from gyreprof._support.io import write_atomic
    from gyreprof.model._serial import dumps

    path = directory / FOLDER_FILE
    write_atomic(path, (dumps(report, indent=2) + "\n").encode())
    return path


def read_report(folder: Path, notes: list[str]) -> ar.RolloutReport | None:
    """The rollout report a ``--save`` folder keeps; None when it has none (a run with
    no requests, or a folder saved before it was kept); a bad one is a note."""
    from gyreprof._support import io as _io
    from gyreprof.model._serial import loads

    path = folder / FOLDER_FILE
    try:
        data = _io.read_bytes(path, "snapshot", what="gyreprof run --save rollouts")
        return loads(ar.RolloutReport, data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError, TypeError, KeyError) as exc:
        notes.append(f"skipped {FOLDER_FILE} of the folder: {str(exc)[:200]}")
        return None
