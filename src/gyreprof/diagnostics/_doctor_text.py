"""The doctor's diagnosis as text (private helper of :mod:`gyreprof.diagnostics.doctor`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gyreprof._support.format import shorten
from gyreprof.diagnostics import _procfs
from gyreprof.diagnostics._doctor_evidence import ThreadWait

if TYPE_CHECKING:  # the record imports this module to render itself
    from gyreprof.diagnostics.doctor import ProcessDiagnosis


def render(d: ProcessDiagnosis) -> str:
    """The diagnosis as the terminal shows it: the state, the evidence, the threads of a
    process that does not progress, the log's last lines and the Python stacks."""
    head = f"process {d.pid}"
    if d.command:
        head += f" ({shorten(d.command, 80)})"
    lines = [f"{head}: {d.state.upper()}  (exit code {d.exit_code})"]
    lines += [f"  - {e}" for e in d.evidence]
    if d.threads and d.state in ("blocked", "spinning", "busy", "retrying"):
        lines.append(f"threads ({len(d.threads)}):")
        lines += [f"  {line}" for line in _thread_lines(d.threads)]
    if d.log_tail:
        shown = d.log_tail if d.state == "absent" else d.log_tail[-5:]
        lines.append(f"last {len(shown)} lines of {d.log}:")
        lines += [f"  | {line}" for line in shown]
    if d.stacks:
        lines.append("python stacks (py-spy dump):")
        lines += [f"  {line}" for line in d.stacks.rstrip().splitlines()]
    elif d.stacks_hint:
        lines.append(f"python stacks: {d.stacks_hint}")
    return "\n".join(lines)


def _thread_lines(threads: Sequence[ThreadWait], detailed: int = 8) -> list[str]:
    """One line per thread; beyond ``detailed`` threads, idle ones alike are counted together."""
    if len(threads) <= detailed:
        return [t.describe() for t in threads]
    lines: list[str] = []
    groups: dict[tuple[str, str | None, str | None], list[ThreadWait]] = {}
    for t in threads:
        if t.cpu_s > 0.0 or t is threads[0]:
            lines.append(t.describe())
        else:
            groups.setdefault((t.state, t.waits_on or t.syscall, t.wchan), []).append(t)
    for (state, what, wchan), members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if len(members) == 1:
            lines.append(members[0].describe())
            continue
        parts = [f"{len(members)} threads", _procfs.STATE_WORDS.get(state, state)]
        if what:
            parts.append(what)
        if wchan:
            parts.append(f"[kernel: {wchan}]")
        lines.append(", ".join(parts))
    return lines
