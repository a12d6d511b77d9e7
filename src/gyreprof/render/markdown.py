"""Markdown: ``to_markdown()`` of the result types (GitHub-flavoured tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gyreprof._support import forms as _forms
from gyreprof._support.format import fmt_bytes, fmt_ns, fmt_pct, markdown_table, safe_name
from gyreprof.render import text

if TYPE_CHECKING:
    from gyreprof.analysis.rollouts import RolloutReport
    from gyreprof.analysis.run import RunReport
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.model.summary import Summary

__all__ = ["rollouts", "run_report", "summary", "verdict", "wait_report"]


def _cell(c: str) -> str:
    return c.replace("|", "\\|")  # a '|' in a name would split its cell


def summary(s: Summary, shares: tuple[dict[str, float], str] | None = None) -> str:
    """The summary as a Markdown table under its headline (the text's words: steady steps
    and their rate, or the phase events when no steps are marked); ``shares`` (from
    ``text.wall_shares``): its share column is of the sampler's wall time, with the
    untimed row, said under the table."""
    cells = text.summary_rows(s) if shares is None else text.wall_rows(s, shares[0])
    rows = [[_cell(c) for c in r] for r in cells]
    head = (
        f"**{text.summary_headline(s)}**; {text.warmup(s.warmup, steps_marked=s.step.count > 0)}; "
        f"profiler overhead {fmt_pct(s.overhead_share)}"
        + (f" ({fmt_pct(s.wrapper_share)} the env-call wrappers)" if s.wrapper_share > 0 else "")
    )
    out = head + "\n\n" + markdown_table(list(text.SUMMARY_HEADERS), rows) + "\n"
    if shares is not None:
        out += "\n" + text.wall_basis(shares[1]) + "\n"
    return out


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
    """The run's report; its advice worded for where it is read (``r.advice_for``), as
    the text's."""
    from gyreprof._support import advice as _advice

    with _advice.advice_for(r.advice_for):
        return _run_report(r)


def _run_report(r: RunReport) -> str:
    head = f"**gyreprof run: {' '.join(r.command)}**" if r.command else "**gyreprof: saved run**"
    parts = [head, "", "processes: " + text.run_processes(r)]
    roles, parallel = text.sampler_role_parts(r)
    for head, headers, rows in roles:  # per process role, as the text shows them
        cells = [[_cell(c) for c in row] for row in rows]
        parts += ["", f"### {head}", "", markdown_table(headers, cells)]
    if parallel:
        parts += ["", *parallel]
    if r.sampler is not None and not roles:
        s = r.sampler.summary()
        parts += ["", "### sampler", "", summary(s, text.wall_shares(s, r.verdict))]
    if r.trainer is not None:
        parts += ["", "### trainer", "", summary(r.trainer.summary())]
    parts += user_profiles(r)
    if r.wait is not None:
        parts += ["", "### wait", "", wait_report(r.wait)]
    if r.verdict is not None:
        parts += ["", "### verdict", "", verdict(r.verdict)]
    if r.rollouts is not None:
        parts += ["", "### rollouts", "", rollouts(r.rollouts)]
    if r.notes:
        parts += ["", *(f"- note: {n}" for n in r.notes)]
    return "\n".join(parts).rstrip("\n") + "\n"


def user_profiles(r: RunReport) -> list[str]:
    """The tables of the user's own Profilers (those that do not stand for the trainer),
    as the text report shows them (at most ``text.USER_TABLES``)."""
    from gyreprof._support import advice as _advice

    parts: list[str] = []
    shown = [(p, u) for p in r.contributed for u in p.user if not u.as_trainer]
    for p, u in shown[: text.USER_TABLES]:
        head = f"### your profiler {_cell(safe_name(u.name))} in {_cell(safe_name(p.role))} {p.pid}"
        with _advice.advice_for("code"):
            parts += ["", head, "", summary(u.snapshot.summary())]
    if len(shown) > text.USER_TABLES:
        parts += ["", f"... and {len(shown) - text.USER_TABLES} more of your profilers (not shown)"]
    return parts


# ------------------------------------------------------------------ rollouts

#: the columns of the endpoints' table (the figures of ``render.text.rollouts``)
ROLLOUT_HEADERS = (
    "endpoint",
    "clients",
    "requests",
    "attempts",
    "outcomes",
    "retries",
    "latency p50 / p90 / p99 / max",
    "bytes in / out",
    "tokens prompt / completion",
    "completion tokens/s",
    "in flight mean / max (time at max)",
)


def _code(c: str) -> str:
    """``c`` as an inline code span (a name with a backtick in it is fenced by two)."""
    c = safe_name(c)
    fence = "``" if "`" in c else "`"
    pad = " " if fence == "``" else ""
    return _cell(f"{fence}{pad}{c}{pad}{fence}")


def _ms(p: Any, *which: str) -> str:
    vals = [getattr(p, w) for w in which]
    if all(v is None for v in vals):
        return "-"
    return " / ".join(fmt_ns(None if v is None else v * 1e6) for v in vals)


def _endpoint_row(e: Any) -> list[str]:
    outcomes = ", ".join(f"{k} {v}" for k, v in e.outcomes.items() if v) or "-"
    retries = str(e.retries)
    if e.retries:
        retries += " (" + ", ".join(f"{v} after {k}" for k, v in e.retried.items()) + ")"
    tokens = "-"
    if e.with_usage:
        tokens = f"{e.prompt_tokens:,} / {e.completion_tokens:,} (usage of {e.with_usage})"
    tps = f"{e.tokens_per_s:,.0f}" if e.with_usage and e.tokens_per_s else "-"
    flight = "-"
    if e.in_flight_mean is not None:
        flight = f"{e.in_flight_mean:.1f} / {e.in_flight_max} ({fmt_pct(e.at_max_share)})"
    return [
        _code(e.endpoint),
        _cell(", ".join(safe_name(c) for c in e.clients)),
        str(e.requests),
        str(e.attempts),
        outcomes,
        retries,
        _ms(e.latency, "p50", "p90", "p99", "max"),
        f"{fmt_bytes(e.bytes_in)} / {fmt_bytes(e.bytes_out)}",
        tokens,
        tps,
        flight,
    ]


def _endpoint_details(e: Any) -> list[str]:
    """What the text report says of an endpoint beyond its table row."""
    out: list[str] = []
    if e.streams:
        out.append(
            f"{e.streams} streams ({e.chunks} chunks): time to first token p50 / p90 "
            f"{_ms(e.ttft, 'p50', 'p90')}, inter-chunk p50 / p90 {_ms(e.inter_chunk, 'p50', 'p90')}"
        )
    if e.empty_fields:
        out.append(
            "empty answers read from: "
            + ", ".join(f"{_code(k)} ({v})" for k, v in e.empty_fields.items())
        )
    if e.not_json or e.oversized:
        out.append(f"bodies not scanned: {e.not_json} not JSON, {e.oversized} larger than the cap")
    if e.server is not None:  # the text report's lines of its server, on one line
        out.append(_cell("; ".join(line.strip() for line in text.server_lines(e.server))))
    return [f"- {_code(e.endpoint)}: {line}" for line in out]


def rollouts(r: RolloutReport) -> str:
    """The HTTP rollout requests: a table of the endpoints (requests, outcomes, latency,
    bytes, tokens, in flight), their streams and empty answers, then the batches and
    their tail, and the notes: the figures of the text report."""
    lines = [
        f"**rollout requests ({r.requests} over {len(r.endpoints)} endpoint(s))**",
        "",
        markdown_table(list(ROLLOUT_HEADERS), [_endpoint_row(e) for e in r.endpoints]),
    ]
    details = [d for e in r.endpoints for d in _endpoint_details(e)]
    if details:
        lines += ["", *details]
    batch = text.batch_lines(r)
    if batch:
        lines += ["", *(f"- {b}" for b in batch)]
    if r.notes:
        lines += ["", *(f"- note: {safe_name(n)}" for n in r.notes)]
    return "\n".join(lines) + "\n"


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register("markdown", summary, rollouts, verdict, wait_report, run_report)
