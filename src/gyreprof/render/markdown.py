"""Markdown: ``to_markdown()`` of the result types (GitHub-flavoured tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gyreprof._format import fmt_pct, fmt_rate, markdown_table
from gyreprof.render import text

if TYPE_CHECKING:
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.integrations._auto.collect import RunReport
    from gyreprof.summary import Summary

__all__ = ["run_report", "summary", "verdict", "wait_report"]


def _cell(c: str) -> str:
    return c.replace("|", "\\|")  # a '|' in a name would split its cell


def summary(s: Summary) -> str:
    rows = [[_cell(c) for c in r] for r in text.summary_rows(s)]
    head = (
        f"**{s.steps} steady steps, {fmt_rate(s.steps_per_s)}**; {text.warmup(s.warmup)}; "
        f"profiler overhead {fmt_pct(s.overhead_share)}"
        + (f" ({fmt_pct(s.wrapper_share)} the env-call wrappers)" if s.wrapper_share > 0 else "")
    )
    return head + "\n\n" + markdown_table(list(text.SUMMARY_HEADERS), rows) + "\n"


def verdict(v: Verdict) -> str:
    lines = [f"**verdict: {text.verdict_headline(v)}**", ""]
    lines += [f"{i}. {r}" for i, r in enumerate(v.reasons, 1)]
    for heading, items in text.verdict_sections(v):
        if items:
            lines += ["", f"*{heading}*", ""]
            lines += [f"- {x}" for x in items]
    return "\n".join(lines) + "\n"


def wait_report(r: WaitReport) -> str:
    body = text.wait_report(r).splitlines()
    return f"**{body[0]}**\n\n" + "\n".join(f"- {line.strip()}" for line in body[1:]) + "\n"


def run_report(r: RunReport) -> str:
    head = f"**gyreprof run: {' '.join(r.command)}**" if r.command else "**gyreprof: saved run**"
    parts = [head, "", "processes: " + text.run_processes(r)]
    roles, parallel = text.sampler_role_parts(r)
    for head, headers, rows in roles:  # per process role, as the text shows them
        cells = [[_cell(c) for c in row] for row in rows]
        parts += ["", f"### {head}", "", markdown_table(headers, cells)]
    if parallel:
        parts += ["", *parallel]
    if r.sampler is not None and not roles:
        parts += ["", "### sampler", "", summary(r.sampler.summary())]
    if r.trainer is not None:
        parts += ["", "### trainer", "", summary(r.trainer.summary())]
    if r.wait is not None:
        parts += ["", "### wait", "", wait_report(r.wait)]
    if r.verdict is not None:
        parts += ["", "### verdict", "", verdict(r.verdict)]
    if r.notes:
        parts += ["", *(f"- note: {n}" for n in r.notes)]
    return "\n".join(parts).rstrip("\n") + "\n"
