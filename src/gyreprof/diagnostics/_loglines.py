"""Read the lines a process added to its log during the doctor's observation, and
classify each one (private helper of the doctor).

A line is *progress* (a step, loss, iteration, epoch or rate line, or a match of the
user's ``--progress REGEX``), a *failure* of one kind (``refused``, ``timeout``,
``http 5xx``, ``http 4xx``, ``empty``, ``retry``, ``traceback``) or neither. A line
that reads as progress is progress even if it also says "retry" (``step 12 ...
retries=0``); a failure line is one that reads as no progress at all.

Bounded: at most :data:`MAX_READ_BYTES` of what was added are read per file and
observation (the last ones, where more was added), and each line is cut at
:data:`MAX_LINE_CHARS` characters before it is matched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gyreprof._support.errors import InvalidValueError

#: at most this many bytes of what a file gained are read per observation
MAX_READ_BYTES = 256 * 1024
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
    progress: int = 0
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

    def add(self, text: str, progress_rx: re.Pattern[str] | None) -> None:
        for raw in text.splitlines():
            line = raw.rstrip("\r")[:MAX_LINE_CHARS]
            if not line.strip():
                continue
            self.lines += 1
            kind = classify(line, progress_rx)
            if kind == "progress":
                self.progress += 1
                self.last_progress = line
            elif kind is not None:
                self.failures[kind] = self.failures.get(kind, 0) + 1
                self.last_failure = line
                ep = endpoint_in(line)
                if ep is not None:
                    self.endpoints[ep] = self.endpoints.get(ep, 0) + 1


def read_added(path: str | os.PathLike[str], start: int, end: int) -> tuple[str, bool]:
    """The text a file gained from byte ``start`` to ``end`` (at most MAX_READ_BYTES,
    the last ones; the first partial line dropped when cut). ``("", False)`` when
    unreadable or when the file shrank (rotated or truncated)."""
    if end <= start:
        return "", False
    cut = end - start > MAX_READ_BYTES
    begin = end - MAX_READ_BYTES if cut else start
    try:
        with open(path, "rb") as fh:
            fh.seek(begin)
            data = fh.read(end - begin)
    except (OSError, ValueError):
        return "", False
    text = data.decode("utf-8", errors="replace")
    if cut:
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return text, cut


def read_lines(
    regions: Iterable[tuple[str, int, int]], progress_rx: re.Pattern[str] | None
) -> LineReport:
    """Classify the lines added to each ``(path, start, end)`` region."""
    report = LineReport()
    for path, start, end in regions:
        text, cut = read_added(path, start, end)
        if not text:
            continue
        report.truncated |= cut
        report.sources.append(f"{path} (+{end - start} bytes)")
        report.add(text, progress_rx)
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
        head += f" (the last {MAX_READ_BYTES // 1024} KiB of what was added)"
    parts = [f"{report.progress} progress"] + ([kinds] if kinds else [])
    out.append(f"{head}: {', '.join(parts)}")
    return out
