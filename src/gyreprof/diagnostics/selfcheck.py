"""Sampler self-check: build the sampler alone, call it once, say what came back.

``selfcheck("pkg.module:make_sampler", method="sample", kwargs={...}, timeout_s=60)``
(and ``gyreprof selfcheck module:factory [--method sample] [--kwargs JSON]
[--timeout S]``) runs, in a fresh Python process started from the current folder:

1. import ``module`` and call ``factory(**kwargs)`` to build the sampler, and print its
   endpoint if it has one (an ``endpoint``, ``url``, ``base_url``, ``address`` or
   ``server_url`` attribute, or ``host`` and ``port``);
2. call ``sampler.<method>()`` once (``method=""`` calls the sampler itself);
3. report the result's type, its sample count and the rule that counted it, and the
   elapsed times; the exceptions raised and swallowed inside the call (a broad
   ``except`` around a numpy-2 ``AttributeError`` returns an empty batch while every
   call raised), each with its type, message, where it was raised and where caught;
   and for an empty result the returned object's top-level keys or fields with their
   sizes (the server answered under another key); for an HTTP sampler the last
   response's status and the top-level keys of its JSON answer. Catches inside the
   standard library (``<frozen ...>`` modules included) are not counted. The count
   follows the one reading ``gyreprof sweep`` uses (:mod:`gyreprof._support.sample_count`): an int is the number of samples (a sampler that
   returns 8 produced 8 samples), an array counts its first dimension, a dict of arrays
   their common length, another sized container its ``len``, ``None`` is 0. A bool,
   text, an iterator or any other object is no count: the check says why and fails.

A fresh process means the check sees the sampler alone, and a hang can be abandoned:
after ``timeout_s`` (covering build and call) every thread's stack is taken with
faulthandler, then the process group is terminated -- the check never hangs.
Whatever the factory started (env workers, a server that holds our stdout) is
ended with the check, and nothing is left behind when the check itself is
interrupted (SIGINT, SIGTERM) or its process dies (see :mod:`gyreprof._support.subproc`).

Exit codes (``SelfCheckResult.exit_code`` and the command):

==  ===================================================================
0   the call returned a non-empty result (count > 0)
1   an exception: import, build or call failed (the full traceback is kept); or the
    call returned something that is no sample count (``count_rule == "refused"``)
2   the call returned an empty result (count == 0, or None, or an object with empty
    sequences among its fields: rule ``empty fields``)
3   timed out: the call was abandoned
==  ===================================================================

(The command line also uses 2 for its own usage errors, as argparse does.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.subproc import ChildTree, package_root, request_stacks, sigterm_unwinds
from gyreprof._support.validate import check_positive_number

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_EMPTY = 2
EXIT_TIMEOUT = 3

_STACK_WAIT_S = 1.0
_TERM_WAIT_S = 2.0


@dataclass(frozen=True)
class SelfCheckResult:
    """What one self-check saw.  ``status``: ``ok``, ``error``, ``empty`` or ``timeout``."""

    target: str
    method: str
    status: str
    exit_code: int
    stage: str  # the last stage reached: import, build, call, done
    elapsed_s: float
    build_s: float | None = None
    call_s: float | None = None
    sampler_type: str | None = None
    endpoint: str | None = None
    result_type: str | None = None
    count: int | None = None
    count_rule: str | None = None  # the rule's name: int, first dimension, length, ...
    counted_as: str | None = None  # the rule in words, or why the value is no count
    error: str | None = None
    traceback: str | None = None
    stacks: str | None = None  # every thread's stack when a timed-out call was abandoned
    # exceptions raised and caught inside the call: type, message, raised_at, caught_at, count
    swallowed: list[dict[str, Any]] | None = None
    result_fields: list[str] | None = None  # an empty result's top-level keys / fields
    exception_watch: str | None = None  # the hook that watched the call (settrace slows it)
    http_status: int | None = None  # an HTTP sampler's last response status during the call
    http_keys: list[str] | None = None  # ... and the top-level keys of its JSON answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well (atomically)
        when given."""
        from gyreprof.render import json as render_json

        return render_json.write(self.to_dict(), path, indent=indent)

    def __str__(self) -> str:
        lines = [
            f"selfcheck {self.target} ({'call ' + self.method + '()' if self.method else 'call'})"
        ]
        if self.sampler_type is not None:
            built = f"  built {self.sampler_type}"
            if self.build_s is not None:
                built += f" in {self.build_s:.3f} s"
            lines.append(built)
            lines.append(f"  endpoint: {self.endpoint}" if self.endpoint else "  endpoint: none")
        if self.status in ("ok", "empty"):
            timed = f"{self.call_s:.3f} s"
            if self.exception_watch == "sys.settrace":
                timed += " (with the exception watch on: sys.settrace slows Python calls)"
            lines.append(
                f"  {self.method or 'call'}() returned {self.result_type}, count {self.count} "
                f"({self.counted_as}) in {timed}"
            )
            lines.append(
                f"  counted by rule: {self.count_rule} (the same reading as gyreprof sweep)"
            )
        if self.http_status is not None:
            keys = ", ".join(self.http_keys) if self.http_keys else "no JSON decoded"
            lines.append(f"  last HTTP response: status {self.http_status}, top-level keys: {keys}")
        if self.status == "empty" and self.result_fields:
            lines.append(
                f"  the empty {self.result_type} has: {', '.join(self.result_fields)} "
                "(did the server answer under another key?)"
            )
        elif self.status == "empty" and self.result_fields is not None:
            lines.append(f"  the empty {self.result_type} has no keys or fields")
        if self.swallowed:
            total = sum(int(s.get("count", 1)) for s in self.swallowed)
            lines.append(
                f"  {total} exception{'s' if total != 1 else ''} raised and swallowed inside "
                f"{self.method or 'the call'}():"
            )
            for sw in self.swallowed:
                lines.append(
                    f"    {sw.get('count', 1)} x {sw.get('type')}: {sw.get('message')} "
                    f"(raised at {sw.get('raised_at')}, caught at {sw.get('caught_at')})"
                )
        if self.error:
            lines.append(f"  error: {self.error}")
        if self.traceback:
            lines.append("  traceback:")
            lines += [f"    {line}" for line in self.traceback.rstrip().splitlines()]
        if self.stacks:
            lines.append("  stacks when abandoned:")
            lines += [f"    {line}" for line in self.stacks.rstrip().splitlines()]
        verdict = {
            "ok": "OK",
            "error": "FAILED (exception)",
            "empty": "EMPTY RESULT",
            "timeout": "TIMED OUT (abandoned)",
        }[self.status]
        if self.status == "empty" and self.http_keys:
            verdict += (
                " -- see the response's keys above (did the server answer under another key?)"
            )
        elif self.swallowed and self.status != "ok":
            verdict += " -- see the swallowed exceptions above"
        elif self.status == "empty" and self.result_fields:
            verdict += " -- see its fields above"
        lines.append(f"result: {verdict} after {self.elapsed_s:.2f} s (exit code {self.exit_code})")
        return "\n".join(lines)


def parse_target(target: str) -> tuple[str, str]:
    """Split ``module:factory``; ValueError naming the expected form otherwise."""
    if not isinstance(target, str) or target.count(":") != 1:
        raise InvalidValueError(f"target must look like 'package.module:factory', got {target!r}")
    module, factory = target.split(":")
    ident = r"[A-Za-z_][A-Za-z0-9_]*"
    if not re.fullmatch(rf"{ident}(\.{ident})*", module) or not re.fullmatch(
        rf"{ident}(\.{ident})*", factory
    ):
        raise InvalidValueError(
            f"target must look like 'package.module:factory' (Python names), got {target!r}"
        )
    return module, factory


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by the kill
    return out


def _start_relay(proc: subprocess.Popen[bytes], out: IO[Any]) -> threading.Thread:
    """Copy the child's stdout into a stream that has no file descriptor."""

    def copy() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                out.write(line.decode("utf-8", errors="replace"))
            except (OSError, ValueError):
                pass

    thread = threading.Thread(target=copy, name="gyreprof-selfcheck-relay", daemon=True)
    thread.start()
    return thread


def selfcheck(
    target: str,
    method: str = "sample",
    kwargs: Mapping[str, Any] | None = None,
    timeout_s: float = 60.0,
    *,
    cwd: str | os.PathLike[str] | None = None,
    stdout: IO[Any] | int | None = None,
) -> SelfCheckResult:
    """Build ``module:factory(**kwargs)`` in a fresh process, call ``.method()`` once, report.

    ``timeout_s`` bounds the whole check; past it the process is abandoned and the
    result's ``status`` is ``"timeout"``.  ``cwd``: the folder the child starts in (its
    modules import from there).  ``stdout``: where the sampler's own output goes
    (default: inherited; the command passes stderr when ``--json`` is given).

    Raises ``ValueError`` for a malformed target, non-JSON-serialisable kwargs or a
    non-positive timeout; everything that goes wrong inside the check is a result.
    """
    parse_target(target)
    if not isinstance(method, str):
        raise InvalidValueError(
            "method must be a string (a method name, or '' to call the sampler)"
        )
    if method and not method.isidentifier():
        raise InvalidValueError(f"method must be a Python name, got {method!r}")
    check_positive_number("timeout_s", timeout_s, unit="seconds")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise InvalidValueError(
            f"kwargs must be a mapping of keyword arguments, got {type(kwargs).__name__}"
        )
    try:
        kwargs_json = json.dumps(dict(kwargs or {}))
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"kwargs must be JSON-serialisable: {exc}") from None

    root = package_root()
    # the package path goes first: a gyreprof/ folder in the current one must not shadow it
    bootstrap = (
        "import sys; sys.path.insert(0, " + repr(root) + "); "
        "from gyreprof._support.subproc import bind_to_parent; bind_to_parent(sys.argv[3]); "
        "from gyreprof.diagnostics._selfcheck_child import main; "
        "sys.exit(main(sys.argv[1:3] + sys.argv[4:]))"
    )
    with sigterm_unwinds(), tempfile.TemporaryDirectory(prefix="gyreprof-selfcheck-") as tmp:
        events_path = Path(tmp) / "events.jsonl"
        stacks_path = Path(tmp) / "stacks.txt"
        argv = [
            sys.executable,
            "-c",
            bootstrap,
            str(events_path),
            str(stacks_path),
            tmp,
            target,
            method,
            kwargs_json,
        ]
        target_out: IO[Any] | int | None = stdout
        relay_to: IO[Any] | None = None
        if stdout is not None and not isinstance(stdout, int):
            try:
                stdout.fileno()
            except (AttributeError, OSError, ValueError):  # e.g. io.StringIO: relay by hand
                target_out, relay_to = subprocess.PIPE, stdout
        t0 = time.monotonic()
        tree = ChildTree.start(argv, cwd=cwd, stdout=target_out)
        relay = _start_relay(tree.proc, relay_to) if relay_to is not None else None
        stacks: str | None = None
        try:
            timed_out = not tree.wait(timeout_s)
            if timed_out:
                stacks = request_stacks(tree.proc, stacks_path, _STACK_WAIT_S)
                tree.signal_group(signal.SIGTERM)  # the child ends its group (bind_to_parent)
                tree.wait(_TERM_WAIT_S)
        finally:
            # the check is over: what the factory started (env workers, servers holding
            # our stdout) ends with it
            returncode = tree.end()
        elapsed_s = time.monotonic() - t0
        if relay is not None:
            relay.join(_TERM_WAIT_S)  # the pipe's writers are dead; never wait on more
        events = _read_events(events_path)
    return _result(target, method, events, timed_out, returncode, elapsed_s, stacks, timeout_s)


def _strings(value: Any) -> list[str] | None:
    """A list of strings from the child's event (anything else: None)."""
    if not isinstance(value, list):
        return None
    return [str(v)[:500] for v in value[:50]]


def _swallowed(value: Any) -> list[dict[str, Any]] | None:
    """The child's swallowed-exception records, checked at the boundary."""
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for item in value[:50]:
        if not isinstance(item, dict):
            continue
        count = item.get("count", 1)
        out.append(
            {
                "type": str(item.get("type", "?")),
                "message": str(item.get("message", ""))[:500],
                "raised_at": str(item.get("raised_at", "?")),
                "caught_at": str(item.get("caught_at", "?")),
                "count": count if isinstance(count, int) and not isinstance(count, bool) else 1,
            }
        )
    return out


def _http(value: Any) -> dict[str, Any]:
    """The child's HTTP event, checked at the boundary: ``http_status`` and ``http_keys``."""
    if not isinstance(value, dict):
        return {}
    status = value.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        return {}
    return {"http_status": status, "http_keys": _strings(value.get("keys"))}


def _result(
    target: str,
    method: str,
    events: list[dict[str, Any]],
    timed_out: bool,
    returncode: int | None,
    elapsed_s: float,
    stacks: str | None,
    timeout_s: float,
) -> SelfCheckResult:
    info: dict[str, Any] = {}
    stage = "import"
    for ev in events:
        name = ev.get("stage")
        if name == "build":
            stage = "build"
        elif name == "built":
            stage = "built"
            info.update(
                build_s=ev.get("build_s"),
                sampler_type=ev.get("sampler_type"),
                endpoint=ev.get("endpoint"),
            )
        elif name == "call":
            stage = "call"
        elif name == "done":
            stage = "done"
            info.update(
                call_s=ev.get("call_s"),
                result_type=ev.get("result_type"),
                count=ev.get("count"),
                count_rule=ev.get("count_rule"),
                counted_as=ev.get("counted_as"),
                swallowed=_swallowed(ev.get("swallowed")),
                result_fields=_strings(ev.get("result_fields")),
                exception_watch=(
                    str(ev["exception_watch"])[:40] if ev.get("exception_watch") else None
                ),
                **_http(ev.get("http")),
            )
        elif name == "error":
            info.update(
                error=ev.get("error"),
                traceback=ev.get("traceback"),
                call_s=ev.get("call_s"),
                swallowed=_swallowed(ev.get("swallowed")),
                **_http(ev.get("http")),
            )
            stage = str(ev.get("where", stage))
    common: dict[str, Any] = {
        "target": target,
        "method": method,
        "elapsed_s": elapsed_s,
        "stage": stage,
    }
    if timed_out:
        where = {
            "import": "importing the module",
            "build": "building the sampler",
            "built": "building the sampler",
            "call": f"calling {method or 'the sampler'}()",
            "done": "finishing",
        }.get(stage, stage)
        return SelfCheckResult(
            **common,
            **info,
            status="timeout",
            exit_code=EXIT_TIMEOUT,
            stacks=stacks,
            error=info.get("error")
            or f"no answer within {timeout_s:g} s while {where}; the call was abandoned",
        )
    if "error" in info:
        return SelfCheckResult(**common, **info, status="error", exit_code=EXIT_ERROR)
    if stage != "done":
        code = "a signal" if returncode is not None and returncode < 0 else f"code {returncode}"
        return SelfCheckResult(
            **common,
            **info,
            status="error",
            exit_code=EXIT_ERROR,
            error=f"the check process ended with {code} during {stage} "
            "(os._exit, sys.exit or a crash in native code)",
        )
    if info.get("count_rule") == "refused":
        return SelfCheckResult(
            **common,
            **info,
            status="error",
            exit_code=EXIT_ERROR,
            error=(
                f"{method or 'the sampler'}() returned {info.get('result_type')}, which is no "
                f"sample count: {info.get('counted_as')}"
            ),
        )
    if not info.get("count"):
        return SelfCheckResult(**common, **info, status="empty", exit_code=EXIT_EMPTY)
    return SelfCheckResult(**common, **info, status="ok", exit_code=EXIT_OK)
