"""Read the lines a process added to its log during the doctor's observation, and
classify each one (private helper of the doctor).

A line reads as a *progress line* (a step, loss, iteration, epoch, sample-count or
rate line), a *failure* of one kind (``refused``, ``timeout``, ``http 5xx``,
``http 4xx``, ``empty``, ``retry``, ``traceback``) or neither. A line that reads as
progress is progress even if it also says "retry" (``step 12 ... retries=0``); a
failure line is one that reads as no progress at all.

A progress line only *counts* as progress when a counter it carries (``step=12``,
``epoch 3``, ``loss: 0.31``, ``120/1000 [``, ``35 it/s``) has a value that changed
since the previous line of the same file carrying that counter (the lines just
before the added ones are read for those values), or when it matches the user's
``--progress REGEX``. A heartbeat (``step=0 ... waiting``) repeats its value: it is
a *still* line, never progress.

Bounded: at most :data:`MAX_READ_BYTES` are read per file and observation (the last
ones of the file: the added lines, and before them the lines that give the counters'
previous values), and each line is cut at :data:`MAX_LINE_CHARS` characters before it
is matched. A file whose bytes hold a NUL (an event file, a checkpoint) is not text:
its lines are not read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gyreprof._support.errors import InvalidValueError

#: at most this many bytes (the last ones) of a file are read per observation
MAX_READ_BYTES = 1024 * 1024
#: of which, where more was added than is read, this many just before the added ones
#: (the counters' previous values)
HEAD_BYTES = 64 * 1024
#: each line is cut to this many characters before it is classified or quoted
MAX_LINE_CHARS = 400

_PROGRESS = re.compile(
    r"\b(?:step|steps|global_step|iter|iters|iteration|iterations|epoch|episode|"
    r"update|updates|timesteps|total_timesteps|batch)\b\s*[:=#]?\s*\d"
    r"|\b(?:loss|reward|ep_rew_mean|return|lr|accuracy|acc)\b\s*[:=]\s*-?\d"
    r"|\d[\d.,]*\s*(?:it|steps|samples|frames|fps|tok(?:ens)?|batches)\s*/\s*s\b"
    r"|\b(?:fps|throughput|steps_per_s|samples_per_s)\b\s*[:=|]?\s*\d"
    # SB3's table rows: "|    iterations    | 7 |"
    r"|\b(?:iterations|total_timesteps|n_updates|ep_rew_mean|ep_len_mean|\w*loss)\s*\|\s*-?\d",
    re.IGNORECASE,
)

#: (kind, pattern), first match wins
#: (name, value) of a counter a line carries: a named step / iteration / epoch / sample
#: count / loss, an SB3 table row, a tqdm bar's ``done/total [``, a rate's ``N it/s``
_COUNTERS = re.compile(
    r"\b(?P<name>step|steps|global_step|iter|iters|iteration|iterations|epoch|epochs|episode|"
    r"episodes|update|updates|timesteps|total_timesteps|num_timesteps|batch|samples|"
    r"num_samples|n_samples|frames|sample_count|loss|\w+_loss|reward|ep_rew_mean|return|"
    r"accuracy|acc|n_updates|ep_len_mean)\b\s*(?:[:=#|]\s*|\s)(?P<value>-?\d[\d.,]*(?:e[-+]?\d+)?|nan|inf)"
    r"|(?P<done>\d+)\s*/\s*\d+\s*\["
    r"|(?P<rate>\d[\d.,]*)\s*(?P<unit>it|steps|samples|frames|fps|tok(?:ens)?|batches)\s*/\s*s\b",
    re.IGNORECASE,
)


def counters(line: str) -> dict[str, str]:
    """The counters a line carries, by name (lower case), with their values as written."""
    out: dict[str, str] = {}
    for m in _COUNTERS.finditer(line):
        if m.group("name"):
            out.setdefault(m.group("name").lower(), m.group("value").lower())
        elif m.group("done"):
            out.setdefault("(done)", m.group("done"))
        else:
            out.setdefault(f"{m.group('unit').lower()}/s", m.group("rate"))
    return out


_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "refused",
        re.compile(
            r"connection\s*refused|ECONNREFUSED|\[Errno 111\]|actively refused|"
            r"failed to (?:establish a new )?connect|could not connect|cannot connect|"
            r"connect(?:ion)? (?:error|failed)",
            re.IGNORECASE,
        ),
    ),
    (
        "timeout",
        re.compile(
            r"timed?\s*out|time-?out|deadline[_ ]exceeded|ETIMEDOUT|\[Errno 110\]",
            re.IGNORECASE,
        ),
    ),
    (
        "http 5xx",
        re.compile(
            r"\b(?:HTTP|status(?: code)?|response|returned|got)\W{0,3}5\d\d\b|\b5\d\d\s+"
            r"(?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)",
            re.IGNORECASE,
        ),
    ),
    (
        "http 4xx",
        re.compile(
            r"\b(?:HTTP|status(?: code)?|response|returned|got)\W{0,3}4\d\d\b|\b4\d\d\s+"
            r"(?:Bad Request|Unauthorized|Forbidden|Not Found|Too Many Requests)",
            re.IGNORECASE,
        ),
    ),
    (
        "empty",
        re.compile(
            r"\b(?:0|zero|no)\s+(?:items|samples|rollouts|results|trajectories|episodes|"
            r"records|batches)\b|\bempty\s+(?:batch|result|response|list|queue|reply)\b|"
            r"\b(?:returned|got|received)\s+(?:nothing|empty|\[\]|\{\})",
            re.IGNORECASE,
        ),
    ),
    (
        "retry",
        re.compile(r"\bretr(?:y|ying|ies|ied)\b|back-?off|reconnect|attempt\s+\d", re.IGNORECASE),
    ),
    (
        "traceback",
        re.compile(
            r"^Traceback \(most recent call last\)|^\w+(?:\.\w+)*(?:Error|Exception):",
        ),
    ),
)

_URL = re.compile(r"\b(?:https?|grpc|ws|tcp)://([A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})")
_HOSTPORT = re.compile(
    r"(?<![\w.:/])((?:\d{1,3}\.){3}\d{1,3}|localhost|\[[0-9A-Fa-f:]+\]|[A-Za-z][\w\-]*(?:\.[\w\-]+)*)"
    r":(\d{2,5})\b(?![.:\d])"
)
_HOSTPORT_TUPLE = re.compile(r"\(\s*'([^']+)'\s*,\s*(\d{1,5})\s*\)")  # ('127.0.0.1', 18004)


@dataclass(frozen=True)
class Endpoint:
    """A host and port named by a log line or seen on a socket."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def endpoint_in(line: str) -> Endpoint | None:
    """The first host:port (or URL's) a line names, or None."""
    for rx in (_URL, _HOSTPORT_TUPLE, _HOSTPORT):
        m = rx.search(line)
        if m is None:
            continue
        host, port_text = m.group(1).strip("[]"), m.group(2)
        port = int(port_text)
        if 0 < port < 65536 and not host.lower().startswith(("file", "line")):
            return Endpoint(host, port)
    return None


def classify(line: str, progress: re.Pattern[str] | None = None) -> str | None:
    """``"progress"``, a failure kind, or None for a line that says neither."""
    if progress is not None and progress.search(line):
        return "progress"
    for kind, rx in _FAILURES:
        if rx.search(line):
            # "step 120 loss=0.3 (1 retry)": the step says it moved
            if kind == "retry" and _PROGRESS.search(line):
                return "progress"
            return kind
    if _PROGRESS.search(line):
        return "progress"
    return None


@dataclass
class LineReport:
    """What the added lines of every file read said, taken together."""

    lines: int = 0  # lines read
    progress: int = 0  # lines whose counter moved (or matching --progress)
    still: int = 0  # progress-looking lines whose counters repeated their previous values
    last_still: str | None = None
    failures: dict[str, int] = field(default_factory=dict)  # kind -> count
    last_failure: str | None = None  # the last failure line, cut
    last_progress: str | None = None
    endpoints: dict[Endpoint, int] = field(default_factory=dict)  # named by failure lines
    sources: list[str] = field(default_factory=list)  # "PATH (+N bytes)"
    truncated: bool = False  # more was added than was read

    @property
    def failure_count(self) -> int:
        return sum(self.failures.values())

    @property
    def main_kind(self) -> str | None:
        if not self.failures:
            return None
        return max(self.failures.items(), key=lambda kv: kv[1])[0]

    def add(
        self,
        text: str,
        progress_rx: re.Pattern[str] | None,
        before: dict[str, str] | None = None,
    ) -> None:
        """Classify the lines of ``text``; ``before``: each counter's value in the lines
        before them (updated as lines are read)."""
        last = before if before is not None else {}
        for raw in text.splitlines():
            line = raw.rstrip("\r")[:MAX_LINE_CHARS]
            if not line.strip():
                continue
            self.lines += 1
            kind = classify(line, progress_rx)
            seen = counters(line)
            moved = any(name in last and last[name] != v for name, v in seen.items())
            last.update(seen)
            if kind == "progress" and progress_rx is not None and progress_rx.search(line):
                moved = True
            if kind == "progress" and moved:
                self.progress += 1
                self.last_progress = line
            elif kind == "progress":
                self.still += 1
                self.last_still = line
            elif kind is not None:
                self.failures[kind] = self.failures.get(kind, 0) + 1
                self.last_failure = line
                ep = endpoint_in(line)
                if ep is not None:
                    self.endpoints[ep] = self.endpoints.get(ep, 0) + 1


def read_added(path: str | os.PathLike[str], start: int, end: int) -> tuple[str, bool]:
    """The text a file gained from byte ``start`` to ``end`` (at most MAX_READ_BYTES,
    the last ones; the first partial line dropped when cut). ``("", False)`` when
    unreadable, not text, or when the file shrank (rotated or truncated)."""
    _, text, cut = read_region(path, start, end)
    return text, cut


def read_region(path: str | os.PathLike[str], start: int, end: int) -> tuple[str, str, bool]:
    """(the text just before byte ``start``, the text from ``start`` to ``end``, whether
    the added text was cut), reading at most MAX_READ_BYTES: the last ones up to
    ``end``. Empty texts when unreadable, when the bytes hold a NUL (not text) or when
    nothing was added."""
    if end <= start:
        return "", "", False
    cut = end - start > MAX_READ_BYTES
    try:
        with open(path, "rb") as fh:
            if cut:  # more was added than is read: the lines just before it give the values
                first = max(0, start - HEAD_BYTES)
                fh.seek(first)
                before = fh.read(start - first)
                begin = end - (MAX_READ_BYTES - len(before))
                fh.seek(begin)
                added = fh.read(end - begin)
            else:
                first = max(0, end - MAX_READ_BYTES)
                fh.seek(first)
                blob = fh.read(end - first)
                before, added = blob[: start - first], blob[start - first :]
    except (OSError, ValueError):
        return "", "", False
    if b"\0" in before or b"\0" in added:
        return "", "", False
    head = before.decode("utf-8", errors="replace")
    text = added.decode("utf-8", errors="replace")
    if first > 0:  # the first line before the added ones is partial
        head = head.split("\n", 1)[1] if "\n" in head else ""
    if cut:  # so is the first added line read
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return head, text, cut


def _values_before(head: str, lines: int = 2000) -> dict[str, str]:
    """Each counter's last value in ``head`` (its last ``lines`` lines, newest first)."""
    last: dict[str, str] = {}
    for raw in reversed(head.splitlines()[-lines:]):
        for name, value in counters(raw[:MAX_LINE_CHARS]).items():
            last.setdefault(name, value)
    return last


def read_lines(
    regions: Iterable[tuple[str, int, int]], progress_rx: re.Pattern[str] | None
) -> LineReport:
    """Classify the lines added to each ``(path, start, end)`` region; a counter's value
    is compared with its previous value in the same file."""
    report = LineReport()
    for path, start, end in regions:
        head, text, cut = read_region(path, start, end)
        if not text:
            continue
        report.truncated |= cut
        report.sources.append(f"{path} (+{end - start} bytes)")
        report.add(text, progress_rx, _values_before(head))
    return report


def compile_progress(pattern: str | None) -> re.Pattern[str] | None:
    """The user's ``--progress REGEX``; ValueError naming a bad one."""
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern:
        raise InvalidValueError(f"progress must be a non-empty regular expression, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidValueError(
            f"progress {pattern!r} is not a valid regular expression: {exc}"
        ) from None


def describe(report: LineReport) -> list[str]:
    """The report in plain words (one line per finding)."""
    if not report.lines:
        return []
    out = []
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(report.failures.items(), key=lambda kv: -kv[1]))
    head = f"read {report.lines} added line{'s' if report.lines != 1 else ''}"
    if report.truncated:
        head += f" (the last {MAX_READ_BYTES // 1024} KiB of the file)"
    parts = [f"{report.progress} progress (a counter moved)"]
    if report.still:
        parts.append(f"{report.still} with a counter that did not move")
    parts += [kinds] if kinds else []
    out.append(f"{head}: {', '.join(parts)}")
    return out
