"""Plain text: what ``print(result)`` shows for every result type.

Each function takes the result and returns the text; the classes' ``__str__`` call
these. Names a user chose go through :func:`gyreprof._support.format.safe_name`, so the
text is safe to print.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gyreprof._support import advice as _advice
from gyreprof._support import forms as _forms
from gyreprof._support import notes as _notes
from gyreprof._support.format import (
    IDLE,
    STEP,
    SUMMARY_HEADERS,
    UNTIMED,
    fmt_factor,
    fmt_ns,
    fmt_pct,
    fmt_rate,
    fmt_speedup,
    safe_name,
    text_table,
)

if TYPE_CHECKING:
    from gyreprof.analysis.rollouts import Percentiles, RolloutReport
    from gyreprof.analysis.run import ProcessEntry, RunReport
    from gyreprof.analysis.server_metrics import ServerReport
    from gyreprof.analysis.verdict import Verdict
    from gyreprof.analysis.wait import WaitReport
    from gyreprof.model.summary import PhaseStats, Summary, WarmupInfo
    from gyreprof.model.window import Window

__all__ = [
    "SUMMARY_HEADERS",
    "overhead_line",
    "phase_rows",
    "rate_cell",
    "phase_stats",
    "rollouts",
    "run_report",
    "run_processes",
    "user_profiles",
    "summary",
    "summary_headline",
    "summary_rows",
    "summary_table",
    "verdict",
    "verdict_headline",
    "wait_report",
    "wall_basis",
    "wall_rows",
    "wall_shares",
    "warmup",
    "window",
]

#: the columns of the summary table (text, Markdown and HTML)


# ------------------------------------------------------------------- summary


def phase_rows(s: Summary) -> list[tuple[str, PhaseStats]]:
    """The rows of a summary: one per phase, then whole steps when steps were marked."""
    rows = list(s.phases.items())
    if s.step.count:
        rows.append((STEP, s.step))
    return rows


def summary_rows(s: Summary) -> list[list[str]]:
    """The summary table as formatted cells, one row per phase and one for whole steps
    (names through :func:`~gyreprof._support.format.safe_name`: safe to print)."""
    return [
        [
            safe_name(name),
            str(st.count),
            *(fmt_ns(v) for v in (st.mean, st.p50, st.p90, st.p99, st.p999, st.max)),
            fmt_pct(st.share) if name != STEP else "",
        ]
        for name, st in phase_rows(s)
    ]


def summary_table(s: Summary) -> str:
    return text_table(list(SUMMARY_HEADERS), summary_rows(s))


def wall_shares(s: Summary, v: Verdict | None = None) -> tuple[dict[str, float], str]:
    """Each phase's share of the sampler's wall time, its idle and untimed shares, and
    what the wall time was taken from: the verdict's own shares when they are shares of
    this summary's phase sums (one wall time for every phase), else this summary's
    elapsed time, as the verdict takes it when no steps are marked and no trainer
    tells the loop (gyreprof.analysis.verdict, step 3)."""
    timed = {n: float(st.sum_ns) for n, st in s.phases.items() if st.count > 0}
    if v is not None and v.sampler_shares and _same_wall(timed, v.sampler_shares):
        return dict(v.sampler_shares), v.sampler_wall or "-"
    if s.steps > 0 and s.step.sum_ns > 0:
        wall, basis = float(s.step.sum_ns), "its marked steps"
    else:
        wall, basis = s.elapsed_s * 1e9, "its profile's elapsed time (no steps marked)"
    whole = sum(v for v in timed.values() if math.isfinite(v))
    if wall <= 0 or whole > 1.05 * wall:
        wall, basis = whole, "its timed phases (they add up to more than its wall time)"
    elif whole > wall:  # a block still open at the end: the phases fill the wall
        wall = whole
    if wall <= 0:
        return {**dict.fromkeys(timed, 0.0), UNTIMED: 0.0}, basis
    shares = {n: x / wall for n, x in timed.items()}
    idle = min(float(s.counters.get("idle_ns", 0)), max(0.0, wall - whole)) / wall
    if idle > 0:
        shares[IDLE] = idle
    shares[UNTIMED] = max(0.0, 1.0 - min(1.0, whole / wall) - idle)
    return shares, basis


def _same_wall(timed: dict[str, float], shares: dict[str, float]) -> bool:
    """The shares are of these phase sums: the same phases, each sum over its share
    giving one wall time."""
    named = {n for n in shares if n not in (UNTIMED, IDLE)}
    if named != set(timed):
        return False
    walls = [timed[n] / shares[n] for n in named if shares[n] > 0 and math.isfinite(timed[n])]
    if not walls:
        return not any(timed.values())
    return max(walls) - min(walls) <= 1e-6 * max(walls)


def wall_rows(s: Summary, shares: dict[str, float]) -> list[list[str]]:
    """The summary table's cells with the share column of the sampler's wall time
    (``shares`` from :func:`wall_shares`): a phase that did not run shows 0.0%, and the
    idle and untimed parts follow the phases as rows of their own."""
    rows = summary_rows(s)
    named = [name for name, _ in phase_rows(s)]
    out = []
    for name, row in zip(named, rows, strict=True):
        if name != STEP:
            row = [*row[:-1], fmt_pct(shares.get(name, 0.0))]
        out.append(row)
    blank = [""] * (len(SUMMARY_HEADERS) - 2)
    extra = [[key, *blank, fmt_pct(shares[key])] for key in (IDLE, UNTIMED) if key in shares]
    at = len(s.phases)  # before the whole-step row
    return out[:at] + extra + out[at:]


def wall_basis(basis: str) -> str:
    """The line under a table whose shares are of the sampler's wall time."""
    return f"share: of the sampler's wall time (from {basis})"


def phase_stats(st: PhaseStats, name: str = "phase") -> str:
    """One phase in one line: count, mean, percentiles, max and share."""
    return (
        f"{safe_name(name)}: {st.count} calls, mean {fmt_ns(st.mean)}, p50 {fmt_ns(st.p50)}, "
        f"p90 {fmt_ns(st.p90)}, p99 {fmt_ns(st.p99)}, p99.9 {fmt_ns(st.p999)}, "
        f"max {fmt_ns(st.max)}, share {fmt_pct(st.share)}"
    )


def warmup(w: WarmupInfo, *, steps_marked: bool = True) -> str:
    """The warm-up line; its advice is worded for where it is read (gyreprof._support.advice).
    ``steps_marked``: the profile marks steps (a warm-up in steps can end)."""
    if w.rule == "none":
        if _advice.where() == "code" and steps_marked:
            return "warm-up: none excluded (pass warmup_steps= or warmup_s= to exclude it)"
        return f"warm-up: none excluded; to exclude it, {_advice.warmup(steps_marked)}"
    if not w.done:
        hint = ""
        if w.steps == 0 and "step" in w.rule:
            hint = "; " + _advice.warmup_counts_steps()
        return f"warm-up: {w.rule}, still warming up ({w.steps} steps so far{hint})"
    steps = "1 step" if w.steps == 1 else f"{w.steps} steps"
    return f"warm-up: {w.rule} excluded, {steps}, {fmt_ns(w.elapsed_ns)}"


def summary_headline(s: Summary, sources: str = "") -> str:
    """How many steady steps in how long, at what rate (or how many events without
    steps); ``sources`` is put after the numbers (" from 3 sources")."""
    if s.steps:
        return f"{s.steps} steady steps in {s.elapsed_s:.3g} s ({fmt_rate(s.steps_per_s)}){sources}"
    return f"{s.events} phase events{sources} (no steps marked)"


def overhead_line(s: Summary, *, figures: bool = False) -> str:
    """The profiler's own share of the wall time, its cost per boundary and the clock
    (and the significant figures when ``figures``); without a measured lap cost, the
    share alone."""
    head = f"profiler overhead: {fmt_pct(s.overhead_share)} of wall time"
    if s.wrapper_share > 0:  # the patched env calls' wrappers (gyreprof run) apart
        rest = max(0.0, s.overhead_share - s.wrapper_share)
        head += (
            f": {fmt_pct(s.wrapper_share)} the env-call wrappers (env.step/reset, vector "
            f"calls; their clock reads included), {fmt_pct(rest)} the other clock reads"
        )
    if not math.isfinite(s.lap_cost_ns):
        return head
    extra = f", {s.significant_figures} significant figures" if figures else ""
    return f"{head} (~{s.lap_cost_ns:.0f} ns per boundary, clock={s.clock}{extra})"


def rate_cell(rate: float | None) -> str:
    """A counter's rate per second (``-`` when it has none)."""
    if rate is None or not math.isfinite(rate):
        return "-"
    return f"{rate:.3g}"


#: the compact report (``gyreprof run`` without ``--verbose``) shows the profiler's
#: overhead only from this share of the wall time up
OVERHEAD_SHOWN = 0.05


def summary(
    s: Summary,
    shares: tuple[dict[str, float], str] | None = None,
    *,
    compact: bool = False,
    warmup_advice: bool = True,
    counters: bool = True,
) -> str:
    """The summary's text; ``shares`` (from :func:`wall_shares`): its share column is of
    the sampler's wall time, with the untimed row, said under the table.

    ``compact`` (the run's report without ``--verbose``): no headline and no share basis
    (the caller's heading carries them), no rows of phases that did not run in steady
    state (those that ran only in the warm-up are named in a line of their own), no
    first-call and warm-up-mean lines, and the profiler's overhead only from
    :data:`OVERHEAD_SHOWN` up. ``warmup_advice=False``: a warm-up that was not excluded
    is said without how to exclude it (the report says that once, elsewhere).
    ``counters=False``: no counters line."""
    return "\n".join(_summary_lines(s, shares, compact, warmup_advice, counters))


def _summary_lines(
    s: Summary,
    shares: tuple[dict[str, float], str] | None,
    compact: bool,
    warmup_advice: bool,
    counters: bool,
) -> list[str]:
    lines = []
    src = f" from {s.sources} sources" if s.sources > 1 else ""
    if not compact:
        lines.append("gyreprof: " + summary_headline(s, src))
    if s.steps:
        spread = s.meta.get("source_rates")
        if s.sources > 1 and isinstance(spread, list) and len(spread) == 3:
            lo, med, hi = (float(x) for x in spread)
            lines.append(
                f"per source: {fmt_rate(lo)} min, {fmt_rate(med)} median, "
                f"{fmt_rate(hi)} max (wall-clock span of all sources above)"
            )
    rows = summary_rows(s) if shares is None else wall_rows(s, shares[0])
    if compact:
        rows = [row for row in rows if row[1] != "0"]
    lines.append(text_table(list(SUMMARY_HEADERS), rows))
    if shares is not None and not compact:
        lines.append(wall_basis(shares[1]))
    w = s.warmup
    steps_marked = s.step.count > 0
    if w.rule != "none" or warmup_advice:
        lines.append(warmup(w, steps_marked=steps_marked))
    elif not compact:
        lines.append("warm-up: none excluded (how to exclude it: under caveats)")
    steady = {**{k: v.mean for k, v in s.phases.items()}, STEP: s.step.mean}
    if compact:
        early = warmup_only(s)
        if early:
            lines.append(early)
    else:
        if w.first_ns:
            parts = [
                f"{safe_name(n)} {fmt_ns(v)} (steady mean {fmt_ns(steady.get(n))})"
                for n, v in w.first_ns.items()
            ]
            lines.append("first call: " + ", ".join(parts))
        if w.mean_ns:
            parts = [
                f"{safe_name(n)} {fmt_ns(v)} -> {fmt_ns(steady.get(n))}"
                for n, v in w.mean_ns.items()
            ]
            lines.append("warm-up vs steady mean: " + ", ".join(parts))
    if not compact or s.overhead_share >= OVERHEAD_SHOWN:
        lines.append(overhead_line(s))
    issues = _notes.data_quality(s)
    inexact = [
        safe_name(n)
        for n, p in {**s.phases, STEP: s.step}.items()
        if p.count > 0 and math.isnan(p.mean)
    ]
    if inexact:
        issues.append(_notes.inexact_sums(inexact))
    if issues:
        lines.append("note: " + "; ".join(issues))
    if s.counters and counters:
        lines.append(
            "counters: " + ", ".join(_counter_cell(s, k, v) for k, v in s.counters.items())
        )
    return lines


def warmup_only(*summaries: Summary) -> str:
    """The phases that ran only in the warm-up (no steady call, so no row in a compact
    table), with their first call and warm-up mean; empty when there are none. A phase
    with no steady call and no warm-up call did not run at all."""
    found: dict[str, tuple[float, float | None]] = {}
    for s in summaries:
        w = s.warmup
        for name, first in w.first_ns.items():
            st = s.phases.get(name)
            if name == STEP or st is None or st.count > 0 or name in found:
                continue
            found[name] = (first, w.mean_ns.get(name))
    if not found:
        return ""
    parts = [
        f"{safe_name(n)} (first call {fmt_ns(first)}"
        + (f", warm-up mean {fmt_ns(mean)})" if mean is not None else ")")
        for n, (first, mean) in found.items()
    ]
    return "ran only in the warm-up (no steady calls, no row above): " + ", ".join(parts)


def _counter_cell(s: Summary, name: str, value: int) -> str:
    """A counter and its rate; one whose name ends in ``_ns`` counts time (the sampler's
    ``idle_ns``): its value as a duration and its share of the profile's elapsed time."""
    if name.endswith("_ns") and s.elapsed_s > 0:
        return (
            f"{safe_name(name)} {fmt_ns(value)} ({fmt_pct(value / 1e9 / s.elapsed_s)} of elapsed)"
        )
    return f"{safe_name(name)} {value} ({rate_cell(s.counter_rates.get(name))}/s)"


def window(w: Window) -> str:
    """One window in one line: its steps, time span, rate and per-phase means."""
    kind = "warm-up" if w.warmup else "steady"
    rate = w.steps_per_s
    parts = [
        f"window {w.index} ({w.source}, {kind}): steps {w.first_step}.."
        f"{w.first_step + max(0, w.steps - 1)} in {w.duration_s:.3g} s"
        + (f" ({fmt_rate(rate)})" if math.isfinite(rate) else "")
    ]
    for name, st in w.phases.items():
        parts.append(f"{safe_name(name)} p50 {fmt_ns(st.p50)}, p99 {fmt_ns(st.p99)}")
    return "; ".join(parts)


# ----------------------------------------------------------------- wait report


def wait_report(r: WaitReport, *, compact: bool = False, warmup_said: bool = False) -> str:
    """The wait report's text. ``compact`` (the run's report without ``--verbose``, whose
    first line carries the ratio and its spread): only the spikes' count, the other
    phases and the notes. ``warmup_said``: the report says how to exclude the warm-up
    elsewhere, so its note here is left out."""
    notes = [n for n in r.notes if not (warmup_said and n.startswith(_notes.WARMUP_NOT_EXCLUDED))]
    if compact:
        return "\n".join(_wait_compact(r, notes))
    w, c = r.wait_phase, r.compute_phase
    ws, cs = r.wait_per_step, r.compute_per_step
    lines = [
        f"wait report: trainer phases {w!r} (wait) and {c!r} (compute), {r.steps} steady steps",
        f"wait ratio: {fmt_pct(r.ratio)} of the trainer's time is spent waiting "
        f"(per call: wait mean {fmt_ns(ws['mean'])}, compute mean {fmt_ns(cs['mean'])}); "
        f"an infinitely fast sampler would make training at most "
        f"{fmt_speedup(r.speedup_bound)}",
        f"wait per call: p50 {fmt_ns(ws['p50'])}, p90 {fmt_ns(ws['p90'])}, "
        f"p99 {fmt_ns(ws['p99'])}, max {fmt_ns(ws['max'])}",
    ]
    if r.window_ratios:
        d = r.window_distribution
        kind = "exact, from the ring" if r.window_source == "ring" else "rolling windows"
        lines.append(
            f"per-window wait ratio ({len(r.window_ratios)} windows of "
            f"{r.window_size}, {kind}): p10 {fmt_pct(d['p10'])}, p50 {fmt_pct(d['p50'])}, "
            f"p90 {fmt_pct(d['p90'])}, max {fmt_pct(d['max'])}"
        )
    else:
        lines.append("per-window wait ratio: no steady windows")
    th = r.thresholds
    if r.spikes:
        med = r.spikes[0].median_wait_per_step_ns
        lines.append(
            f"spikes: {len(r.spikes)} window(s) with wait per step >= "
            f"{th['spike_factor']:g}x the median window ({fmt_ns(med)})"
        )
        for s in r.spikes[:10]:
            co = f"; coincides with {', '.join(s.coincident)}" if s.coincident else ""
            lines.append(
                f"  t=+{s.start_s:.3g} s ({s.duration_s:.3g} s), steps {s.first_step}.."
                f"{s.first_step + max(0, s.steps - 1)}: wait/step {fmt_ns(s.wait_per_step_ns)} "
                f"({fmt_factor(s.factor)} the median), window ratio {fmt_pct(s.ratio)}{co}"
            )
        if len(r.spikes) > 10:
            lines.append(f"  ... and {len(r.spikes) - 10} more")
    elif r.window_ratios:
        lines.append(
            f"spikes: none (no window's wait per step reached {th['spike_factor']:g}x "
            "the median window's)"
        )
    for o in r.other.values():
        if r.spikes:
            verdict = (
                "the waits grew when it did"
                if o.coincident_spikes
                else "the waits grew without it (the supply got slower)"
            )
            lines.append(
                f"other phase {o.name!r} ({o.source}): spiked in {len(o.spike_windows)} "
                f"window(s); {o.coincident_spikes} of {len(r.spikes)} wait spikes "
                f"coincide: {verdict}"
            )
        else:
            lines.append(
                f"other phase {o.name!r} ({o.source}): spiked in {len(o.spike_windows)} "
                "window(s); no wait spikes to compare"
            )
    for note in notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _wait_compact(r: WaitReport, notes: list[str]) -> list[str]:
    lines = []
    if r.spikes:
        med = r.spikes[0].median_wait_per_step_ns
        lines.append(
            f"wait spikes: {len(r.spikes)} window(s) with wait per step >= "
            f"{r.thresholds['spike_factor']:g}x the median window ({fmt_ns(med)}); "
            "--verbose lists them"
        )
    for o in r.other.values():
        if o.spike_windows and r.spikes:
            lines.append(
                f"other phase {o.name!r} ({o.source}): {o.coincident_spikes} of "
                f"{len(r.spikes)} wait spikes coincide with its own"
            )
    return lines + [f"note: {n}" for n in notes]


# --------------------------------------------------------------------- verdict


def verdict_headline(v: Verdict) -> str:
    sync = v.loop == "sync"
    dead = getattr(v, "dead_feeder", None)
    if dead is not None:  # the wait is starvation: no side to tune until the feeder runs
        return f"starved: the trainer waits on nothing; {dead['short']}"
    if v.bound == "trainer":
        head = (
            "trainer-bound: compute holds the larger share of wall time; tune it first"
            if sync
            else "trainer-bound: the trainer hardly waits; tune compute, not the sampler"
        )
    elif v.bound == "sampler" and v.rollout_cause is not None:
        head = (
            f"sampler-bound: the trainer waits on its rollout service; {v.rollout_cause['short']}"
        )
    elif v.bound == "sampler":
        head = (
            "sampler-bound: collecting holds the larger share of wall time; tune the sampler"
            if sync
            else "sampler-bound: the trainer waits for batches; tune the sampler"
        )
    elif v.bound == "balanced":
        head = "balanced: the wait is within the noise of the threshold"
        if v.wait_ratio is not None and v.band is not None:
            head += f" ({fmt_pct(v.wait_ratio)}, band +/-{fmt_pct(v.band)})"
        c = v.ceilings
        if "sampler_2x" in c and "trainer_2x" in c:
            head += (
                f"; a 2x faster sampler gives at most {fmt_speedup(c['sampler_2x'])}, "
                f"a 2x faster trainer at most {fmt_speedup(c['trainer_2x'])}"
            )
        if v.rollout_cause is not None:
            head += f"; on the rollout side, {v.rollout_cause['short']}"
    else:
        head = "unknown: no trainer profile, so whether the trainer waits cannot be told"
    if v.rollout_cause is not None:
        pass  # the service's cause is the place to look, not the sampler's phases
    elif v.dominant_phase == UNTIMED and v.coverage is not None:
        untimed = v.sampler_shares.get(UNTIMED, 1.0 - v.coverage)
        sites = getattr(v, "sampler_sites", None)  # stack samples (gyreprof run)
        where = ""
        if sites:
            from gyreprof.analysis.sites import where as site_where

            where = f": {site_where(sites[0])}"
        head += f" (look first at the sampler's untimed {fmt_pct(untimed)}{where})"
    elif v.dominant_phase is not None:
        head += f" (look first at {v.dominant_phase!r})"
    return head + loop_tag(v)


def loop_tag(v: Verdict) -> str:
    """`` [synchronous loop, timeline]``: the loop shape judged and how it was known
    (empty without a trainer profile)."""
    if v.loop is None:
        return ""
    shape = "synchronous loop" if v.loop == "sync" else "overlapped pipeline"
    if v.loop_source == "default":  # no record showed the shape: say so
        return f" [loop shape not detected: judged as an {shape}; --loop tells it]"
    return f" [{shape}, {v.loop_source}]"


# ------------------------------------------------------- the answer, first


#: the side each bound is called by in the answer's first line
SIDES = {
    "sampler": "sampler-bound",
    "trainer": "trainer-bound",
    "balanced": "balanced",
    "unknown": "unknown",
}


def answer(v: Verdict, wait: WaitReport | None = None) -> list[str]:
    """The answer a run's report opens with, in at most three lines: the side with the
    wait ratio and the spread of its per-window ratios (p10 to p90), the named cause,
    and the one next step (the verdict's first advice). ``wait``: the run's wait report
    when the verdict holds none."""
    wr = v.wait_report if v.wait_report is not None else wait
    ratio = v.wait_ratio if v.wait_ratio is not None else (wr.ratio if wr is not None else None)
    dead = getattr(v, "dead_feeder", None)
    side = "starved" if dead is not None else SIDES.get(v.bound, safe_name(v.bound))
    if ratio is None:
        first = f"{side}: no trainer profile, so whether the trainer waits cannot be told"
    else:
        first = f"{side}: the trainer waits {fmt_pct(ratio)} of its time"
        if wr is not None and wr.window_ratios:
            d = wr.window_distribution
            n = len(wr.window_ratios)
            size = "1 step" if wr.window_size == "1 steps" else wr.window_size
            first += (
                f" (per window p10 {fmt_pct(d['p10'])}, p90 {fmt_pct(d['p90'])}; "
                f"{n} window{'s' if n != 1 else ''} of {size})"
            )
        else:
            first += " (no steady windows, so no spread)"
        if dead is not None:
            first += ", on a feeder that died"
        elif v.bound == "balanced" and v.band is not None:
            first += f", within the noise of the threshold (band +/-{fmt_pct(v.band)})"
    lines = [first + loop_tag(v)]
    cause = cause_words(v)
    if cause:
        lines.append(f"cause: {cause}")
    if v.advice:
        lines.append(f"next: {v.advice[0]}")
    return lines


def cause_words(v: Verdict) -> str:
    """The verdict's named cause in a few words: the dead feeder, the rollout service's
    cause, the code or phase the time went to (empty when it names none)."""
    dead = getattr(v, "dead_feeder", None)
    if dead is not None:
        return str(dead["short"])
    if v.rollout_cause is not None:
        return str(v.rollout_cause["short"])
    from gyreprof.analysis.sites import where as site_where

    p = v.dominant_phase
    if v.bound == "trainer":  # the trainer's own time, whatever the sampler's top phase
        wr = v.wait_report
        p = p if p is not None and p not in v.sampler_shares else None
        p = p or (wr.compute_phase if wr is not None else "compute")
    if p is None:
        return ""
    if p == UNTIMED:
        untimed = v.sampler_shares.get(UNTIMED, 1.0 - (v.coverage or 0.0))
        text = f"the sampler's untimed {fmt_pct(untimed)} (time outside its timed phases)"
        if v.sampler_sites:
            text += f", mostly {site_where(v.sampler_sites[0])}"
        return text
    if p in v.sampler_shares:
        return f"{p!r}, {fmt_pct(v.sampler_shares[p])} of the sampler's wall time"
    text = f"the trainer's {p!r}"
    if v.wait_ratio is not None and v.bound == "trainer":
        text += f", {fmt_pct(1.0 - v.wait_ratio)} of its time"
    if v.compute_sites:
        text += f", mostly {site_where(v.compute_sites[0])}"
    return text


def verdict_sections(v: Verdict) -> list[tuple[str, list[str]]]:
    """The verdict's lists under their headings (for every format)."""
    return [
        ("next:", list(v.advice)),
        ("cannot tell:", list(v.unknowns)),
        ("caveats:", list(v.caveats)),
    ]


def verdict(v: Verdict) -> str:
    lines = [f"verdict: {verdict_headline(v)}"]
    lines += [f"  {i}. {r}" for i, r in enumerate(v.reasons, 1)]
    for heading, items in verdict_sections(v):
        if items:
            lines.append(heading)
            lines += [f"  - {x}" for x in items]
    return "\n".join(lines)


#: how the verdict's caveat starts that a compact report leaves to ``--verbose``: the
#: p99 is trustworthy, only the p99.9 is not (and the table shows it as it is)
_P999_ONLY = "enough for p99, but p99.9 needs at least"


def run_verdict(v: Verdict, warmup_line: str | None, *, compact: bool) -> list[str]:
    """The verdict in a run's report, below its tables: the headline and the numbered
    reasons, then the advice after the first (which the answer at the top gave), what
    cannot be told, and the caveats, where ``warmup_line`` replaces the verdict's own
    warm-up caveats (one line for both sides). ``compact`` leaves out the caveat of a
    p99.9 resting on fewer samples than it needs."""
    lines = [f"verdict: {verdict_headline(v)}"]
    lines += [f"  {i}. {r}" for i, r in enumerate(v.reasons, 1)]
    caveats = [c for c in v.caveats if not _is_warmup_caveat(c)]
    if compact:
        caveats = [c for c in caveats if _P999_ONLY not in c]
    if warmup_line:
        caveats.insert(0, warmup_line)
    sections = [("then:", list(v.advice[1:])), ("cannot tell:", list(v.unknowns))]
    for heading, items in [*sections, ("caveats:", caveats)]:
        if len(items) == 1 and heading == "then:":  # one more step: on one line
            lines.append(f"then: {items[0]}")
        elif items:
            lines.append(heading)
            lines += [f"  - {x}" for x in items]
    return lines


def _is_warmup_caveat(text: str) -> bool:
    """The verdict's caveat of a side whose warm-up was not excluded (``side: warm-up was
    not excluded ...``)."""
    _, _, rest = text.partition(": ")
    return text.startswith(_notes.WARMUP_NOT_EXCLUDED) or rest.startswith(
        _notes.WARMUP_NOT_EXCLUDED
    )


def warmup_caveat(r: RunReport) -> str | None:
    """The run's one line on a warm-up left in its numbers, for the sides whose profiles
    excluded none (their slowest first call as the verdict found it); None when every
    side excluded one."""
    sides: dict[str, bool] = {}  # side -> its profile marks steps
    for side, src in (("trainer", r.trainer), ("sampler", r.sampler)):
        if src is not None:
            s = src.summary()
            if s.events > 0 and s.warmup.rule == "none":
                sides[side] = s.step.count > 0
    if not sides:
        return None
    found = {}
    for c in r.verdict.caveats if r.verdict is not None else []:
        side, _, rest = c.partition(": ")
        if side in sides and rest.startswith(_notes.WARMUP_NOT_EXCLUDED) and "; e.g. " in rest:
            found[side] = rest.split("; e.g. ", 1)[1].split("; ", 1)[0]
    if len(sides) == 1:
        ((side, marked),) = sides.items()
        detail = f"; e.g. {found[side]}" if side in found else ""
        return f"{side}: " + _notes.warmup_not_excluded(detail, steps_marked=marked, side=side)
    detail = "".join(
        "; e.g. " + text.replace("the first ", f"the {side}'s first ", 1)
        for side, text in found.items()
    )
    if sides["trainer"]:  # the launcher's trainer (or one that marks steps): one option
        how = _advice.warmup_both()
    else:  # a trainer of the user's that marks no steps: each side its own way
        how = (
            f"for the trainer, {_advice.warmup(False, 'trainer')}; for the sampler, "
            f"{_advice.warmup(False, 'sampler')}"
        )
    return (
        f"trainer and sampler: {_notes.WARMUP_NOT_EXCLUDED} from either, so start-up costs "
        f"(imports, JIT, allocator, first env resets) are in their numbers{detail}; {how}"
    )


# ------------------------------------------------------------------ run report


def run_processes(r: RunReport) -> str:
    got, miss = r.contributed, r.missing
    n = len(r.processes)
    parts = [f"{len(got)} of {n} process{'es' if n != 1 else ''} contributed"]
    if got:
        parts.append(", ".join(f"{p.role} {p.pid} ({p.source})" for p in got))
    line = ": ".join(parts)
    if miss:
        line += "; did not contribute: " + ", ".join(
            f"{p.role} {p.pid} (no snapshot and no readable live segment)" for p in miss
        )
    return line


#: the sampler phases that are env stepping in a process of the run
_ENV_STEPPING = ("env_step", "env_reset")


def _role_groups(r: RunReport) -> dict[str, list[ProcessEntry]]:
    """The contributing processes that recorded sampler phases, by role (main first)."""
    groups: dict[str, list[ProcessEntry]] = {}
    for p in sorted(r.contributed, key=lambda p: p.role != "main"):
        own = p.sampler_figures()
        if own is not None and own.events > 0:
            groups.setdefault(p.role, []).append(p)
    return groups


def _env_ns(s: Summary) -> float:
    return float(sum(s.phases[n].sum_ns for n in _ENV_STEPPING if n in s.phases))


#: the columns of a role's table over several processes (totals: no merged percentiles)
ROLE_HEADERS = ("phase", "count", "mean", "total", "share")


def _role_rows(summaries: list[Summary]) -> list[list[str]]:
    """Per phase, over several processes: calls, mean, total time, share of their phase
    time (each process's time is its own: they run in parallel)."""
    names = list(dict.fromkeys(n for s in summaries for n in s.phases))
    counts = {n: sum(s.phases[n].count for s in summaries if n in s.phases) for n in names}
    totals = {n: float(sum(s.phases[n].sum_ns for s in summaries if n in s.phases)) for n in names}
    whole = sum(totals.values())
    return [
        [
            safe_name(n),
            str(counts[n]),
            fmt_ns(totals[n] / counts[n]) if counts[n] else "-",
            fmt_ns(totals[n]) if counts[n] else "-",
            fmt_pct(totals[n] / whole) if whole > 0 else "-",
        ]
        for n in names
    ]


def sampler_role_parts(
    r: RunReport,
) -> tuple[list[tuple[str, list[str], list[list[str]]]], list[str]]:
    """The sampler's phases per process role when more than one role recorded them, as
    ``(heading, headers, rows)`` tables (main first: one process, its summary table; a
    role of several processes, their totals per phase), and per worker role a line of
    its env stepping against the main loop's wall time. Each share is of that role's own
    time, never of the main loop's wall time plus its parallel workers'. Empty when one
    role recorded everything (the merged table says it all)."""
    groups = _role_groups(r)
    if len(groups) < 2:
        return [], []
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    main_wall = sum(p.sampler_figures().elapsed_s for p in groups.get("main", []))
    parallel = []
    for role, procs in groups.items():
        n = len(procs)
        sums = [p.sampler_figures() for p in procs]
        if n == 1 and procs[0].sampler is not None:  # its whole summary: percentiles too
            shares, basis = wall_shares(sums[0], r.verdict)
            head = f"sampler phases of {safe_name(role)} {procs[0].pid}"
            tables.append((head, list(SUMMARY_HEADERS), wall_rows(sums[0], shares)))
            parallel.append(f"{head}: {wall_basis(basis)}")
        else:
            head = (
                f"sampler phases of {n} {safe_name(role)} processes, totals (shares of their "
                "own phase time, which runs in parallel to the main loop)"
            )
            tables.append((head, list(ROLE_HEADERS), _role_rows(sums)))
        env = sum(_env_ns(s) for s in sums)
        if role != "main" and env > 0 and main_wall > 0:
            parallel.append(
                f"the {n} {safe_name(role)} process{'es' if n != 1 else ''} spent "
                f"{fmt_ns(env)} of env stepping in the main loop's {fmt_ns(main_wall * 1e9)} "
                f"({env / (main_wall * 1e9):.3g}x its wall time, in parallel): not part of "
                "the main loop's shares"
            )
    return tables, parallel


def sampler_roles(r: RunReport, *, compact: bool = False) -> list[str]:
    """:func:`sampler_role_parts` as text lines (empty when one role recorded everything).
    ``compact``: no rows of phases with no steady calls (those that ran in the warm-up
    only are named below the tables)."""
    tables, parallel = sampler_role_parts(r)
    lines: list[str] = []
    for head, headers, rows in tables:
        if compact:
            rows = [row for row in rows if row[1] != "0"]
        lines += ["", head + ":", text_table(headers, rows)]
    if compact and tables:
        groups = _role_groups(r).values()
        early = warmup_only(*(p.sampler_figures() for ps in groups for p in ps))
        if early:
            lines.append(early)
    if parallel:
        lines += ["", *parallel]
    return lines


def merged_count(r: RunReport) -> int:
    """How many processes the run's sampler merged: those holding a sampler snapshot, or
    (a report read back from ``gyreprof run --json``, which keeps the merged summary
    alone) the sources the merged summary counts."""
    n = sum(1 for p in r.contributed if p.sampler_figures() is not None)
    if n == 0 and r.sampler is not None:
        n = int(r.sampler.summary().sources)
    return n


#: a worker whose mean env step is this many times the median worker's is a straggler
STRAGGLER_X = 1.5


def node_parts(r: RunReport) -> tuple[list[str], list[list[str]], list[str]]:
    """The per-node table of a run whose processes carry their node (a Ray job's workers
    reached through Ray): per node its processes, env steps, the sampler's time by phase
    and how long its slowest worker made the others wait (its env stepping over the
    node's median worker's); then the stragglers (a worker whose mean env step is
    :data:`STRAGGLER_X` times the median worker's), named. Empty without nodes or
    snapshots (a report read back from its JSON), or when only the driver has one."""
    procs = [p for p in r.contributed if p.node_id]
    figures = {p.pid: p.sampler_figures() for p in procs}
    sums = {pid: s for pid, s in figures.items() if s is not None}
    if not any(p.role != "main" for p in procs if p.pid in sums):
        return [], [], []  # no worker came home through Ray (the driver's node alone)
    by_node: dict[str, list[ProcessEntry]] = {}
    for p in procs:
        by_node.setdefault(p.node_id, []).append(p)
    phases = (
        [n for n in r.sampler.phases if any(s.phases[n].count for s in sums.values())]
        if r.sampler is not None
        else []
    )
    headers = ["node", "processes", "env steps", *phases, "slowest worker waited on"]
    rows: list[list[str]] = []
    for node, group in sorted(by_node.items(), key=lambda kv: kv[1][0].node_ip):
        mine = [sums[p.pid] for p in group if p.pid in sums]
        steps = sum(s.phases["env_step"].count for s in mine if "env_step" in s.phases)
        cells = [
            fmt_ns(float(sum(s.phases[n].sum_ns for s in mine if n in s.phases))) for n in phases
        ]
        workers = sorted(
            (_env_ns(sums[p.pid]), p.pid) for p in group if p.pid in sums and _env_ns(sums[p.pid])
        )
        held = "-"
        if len(workers) > 1:
            median = (
                workers[len(workers) // 2][0]
                if len(workers) % 2
                else ((workers[len(workers) // 2 - 1][0] + workers[len(workers) // 2][0]) / 2)
            )
            held = f"{fmt_ns(workers[-1][0] - median)} (pid {workers[-1][1]})"
        name = f"{safe_name(group[0].node_ip or '?')} {safe_name(node[:8])}"
        rows.append([name, str(len(group)), str(steps), *cells, held])
    means = []
    for p in procs:
        s = sums.get(p.pid)
        if s is not None and "env_step" in s.phases and s.phases["env_step"].count:
            means.append((s.phases["env_step"].sum_ns / s.phases["env_step"].count, p))
    lines = []
    if len(means) > 1:
        ordered = sorted(m for m, _ in means)
        mid = ordered[len(ordered) // 2]
        for m, p in sorted(means, key=lambda mp: -mp[0]):
            if mid > 0 and m >= STRAGGLER_X * mid:
                lines.append(
                    f"straggler: {safe_name(p.role)} {p.pid} on node {safe_name(p.node_ip)}: "
                    f"its mean env step {fmt_ns(m)} is {m / mid:.1f}x the median worker's "
                    f"({fmt_ns(mid)})"
                )
    return headers, rows, lines


def nodes(r: RunReport) -> list[str]:
    """:func:`node_parts` as text lines (empty when the processes carry no node)."""
    headers, rows, stragglers = node_parts(r)
    if not rows:
        return []
    return ["", "per node (sampler time totals of its processes):", text_table(headers, rows)] + (
        stragglers
    )


def run_report(r: RunReport, *, verbose: bool = False) -> str:
    """The run's report; its advice worded for where it is read (``r.advice_for``).

    It opens with the answer (:func:`answer`: the side, the wait ratio and its spread,
    the cause, the next step), then the tables, the wait report and the verdict's
    reasons, each piece of advice said once. Without ``verbose`` it is compact: no rows
    of phases that did not run, no first-call and warm-up-mean lines, no profiler
    overhead below :data:`OVERHEAD_SHOWN`, the wait report's per-window detail and the
    p99.9 caveat left out; ``verbose`` shows them all."""
    with _advice.advice_for(r.advice_for):
        return _run_report(r, verbose=verbose)


def user_profiles(r: RunReport, *, compact: bool = False) -> list[str]:
    """The tables of the Profilers the user created in the run's processes, but those
    that stand for the trainer (their advice is the API's: the user wrote them)."""
    lines: list[str] = []
    shown = [(p, u) for p in r.contributed for u in p.user if not u.as_trainer]
    for p, u in shown[:USER_TABLES]:
        s = u.snapshot.summary()
        head = f"your profiler {u.name} in {safe_name(p.role)} {p.pid}:"
        lines += ["", f"{head} {summary_headline(s)}" if compact else head]
        with _advice.advice_for("code"):
            lines.append(summary(s, compact=compact))
    if len(shown) > USER_TABLES:
        lines += ["", f"... and {len(shown) - USER_TABLES} more of your profilers (not shown)"]
    return lines


#: at most this many tables of the user's own profilers in a run's report
USER_TABLES = 8


def collector_workers(cw: Any) -> list[str]:
    """A multi-process collector's workers (``analysis.workers.CollectorWorkers``): each
    part's share of their collection wall time, and their wall time against the loop's."""
    if cw is None:
        return []
    shares = cw.shares
    parts = ", ".join(f"{n} {fmt_pct(shares[n])}" for n in sorted(shares, key=lambda n: -shares[n]))
    n = len(cw.workers)
    return [
        "",
        f"collector workers ({n} process{'es' if n != 1 else ''}, timed in each): share of "
        f"their collection wall time: {parts}; {cw.wall_words()}",
    ]


def _trainer_heading(r: RunReport) -> str:
    mine = [(p, u) for p in r.contributed for u in p.user if u.as_trainer]
    if not mine:
        return "trainer (wait: collecting / waiting for a batch; compute: the update):"
    where = ", ".join(f"{u.name} in {safe_name(p.role)} {p.pid}" for p, u in mine)
    return f"trainer (marked by hand: your {where}):"


def _run_report(r: RunReport, *, verbose: bool = False) -> str:
    compact = not verbose
    lines: list[str] = []
    if r.command:  # a report read back from a --save folder saved before run.json has none
        cmd = " ".join(r.command)
        ec = "in this process" if r.exit_code is None else f"exit code {r.exit_code}"
        lines.append(f"gyreprof run: {cmd} ({ec})")
    processes = "processes: " + run_processes(r)
    if not r.recognised:
        lines.append(processes)
        first = r.nothing_recognised()
        lines.append(first)
        lines += [f"note: {n}" for n in r.notes if n != first]
        return "\n".join(lines)
    v = r.verdict
    if v is not None:  # the answer first: the side, the ratio and its spread, cause, next
        lines += [*answer(v, r.wait), ""]
    # one process that contributed says nothing the report does not (--verbose says it)
    if verbose or len(r.processes) != 1 or r.missing:
        lines += [processes, ""]
    warm = warmup_caveat(r)
    body: list[str] = []
    roles = sampler_roles(r, compact=compact)
    if roles:
        body += roles
    elif r.sampler is not None:
        n = merged_count(r)
        s = r.sampler.summary()
        shares = wall_shares(s, r.verdict)
        head = f"sampler phases, merged over {n} process{'es' if n != 1 else ''}:"
        if compact:
            head = (
                f"{head[:-1]} ({summary_headline(s)}); {wall_basis(shares[1])}:"
                if s.steps
                else f"{head[:-1]} ({s.events} phase events, no steps marked); "
                f"{wall_basis(shares[1])}:"
            )
        body += ["", head]
        body.append(
            summary(s, shares, compact=compact, warmup_advice=warm is None, counters=verbose)
        )
    body += collector_workers(getattr(r, "workers", None))
    if r.trainer is not None:
        own = any(u.as_trainer for p in r.contributed for u in p.user)
        t = r.trainer.summary()
        head = _trainer_heading(r)
        body += ["", f"{head} {summary_headline(t)}" if compact else head]
        with _advice.advice_for("code" if own else r.advice_for):  # the user's Profiler
            body.append(
                summary(
                    t,
                    compact=compact,
                    warmup_advice=warm is None,
                    counters=verbose or own,
                )
            )
        su = getattr(r, "start_up", None)
        if su is not None:
            body.append(
                f"start-up: no warm-up rule was given and the first step waited "
                f"{fmt_ns(su.wait_ns)}, far above the {su.rest_steps} steps after it "
                f"(median {fmt_ns(su.rest_p50_ns)}): it is the warm-up above "
                "(gyreprof run --warmup-steps 0 keeps every step)"
            )
    body += nodes(r)
    body += user_profiles(r, compact=compact)
    if r.wait is not None:
        text = wait_report(r.wait, compact=compact, warmup_said=warm is not None)
        if text:
            body += ["", text]
    if v is not None:
        body += ["", *run_verdict(v, warm, compact=compact)]
    elif warm is not None:
        body += ["", "caveats:", f"  - {warm}"]
    if getattr(r, "rollouts", None) is not None:
        body += ["", rollouts(r.rollouts)]
    if r.notes:
        if verbose or getattr(r, "rollouts", None) is not None:
            body.append("")  # compact: the notes follow the caveats (each says "note:")
        body += [f"note: {n}" for n in r.notes]
    while body and not body[0]:
        body.pop(0)
    lines += body
    return "\n".join(_said_once(lines))


#: the prefixes of the lines that give advice or notes (said once in a report)
_ONCE = ("next: ", "then: ", "- ", "note: ")


def _said_once(lines: list[str]) -> list[str]:
    """The lines without a piece of advice or a note said before in other words than its
    heading: ``next: X`` at the top and ``  - X`` under a heading below say the same X."""
    seen: set[str] = set()
    out = []
    for line in lines:
        bare = line.strip()
        key = next((bare[len(p) :] for p in _ONCE if bare.startswith(p)), None)
        if key is not None:
            key = " ".join(key.split()).lower()
            if key in seen:
                continue
            seen.add(key)
        out.append(line)
    return out


# ------------------------------------------------------------------ rollouts


def _ms(p: Percentiles, *which: str) -> str:
    vals = [getattr(p, w) for w in which]
    if all(v is None for v in vals):
        return "-"
    return " / ".join(fmt_ns(None if v is None else v * 1e6) for v in vals)


def _batch_rules(r: RolloutReport) -> str:
    """Which rule made the batches: the groups waited on (gather, map, ...) or busy periods."""
    if not r.batch_rules:
        return "busy periods of an endpoint with 2+ requests"
    return ", ".join(
        f"{v} {safe_name(k)}" if k != "busy period" else f"{v} busy period(s) of an endpoint"
        for k, v in r.batch_rules.items()
    )


def batch_lines(r: RolloutReport) -> list[str]:
    """The batches and their tail, a headline then its details (empty without batches):
    the same lines in the text and the Markdown report."""
    if not r.batch_count:
        return []
    out = [
        f"batches: {r.batch_count} ({_batch_rules(r)}); wall "
        f"p50 / p90 / max {_ms(r.batch_wall, 'p50', 'p90', 'max')}; tail share p50 "
        f"{fmt_pct(r.tail_share_p50)}, p90 {fmt_pct(r.tail_share_p90)}"
    ]
    if r.typical_tail:
        out.append(f"typical: {r.typical_tail}")
    worst = max(r.batches, key=lambda b: b.tail_share, default=None)
    if worst is not None:
        out.append(
            f"longest tail: {worst.words} (median request {fmt_ns(worst.median_ms * 1e6)}, "
            f"slowest {fmt_ns(worst.slowest_ms * 1e6)})"
        )
    if r.tail_dominates:
        out.append(
            "the long tail dominates: half the batches spend at least "
            f"{fmt_pct(r.tail_share_p50)} of their time waiting for their last 10% of requests"
        )
    return out


def server_lines(s: ServerReport) -> list[str]:
    """An endpoint's server as its own metrics tell it (``rollouts.endpoints[].server``)."""
    answers = []
    if s.answers:
        parts = [
            f"{name} {v:.2f} s"
            for name, v in (
                ("queue", s.answer_queue_s),
                ("prefill", s.answer_prefill_s),
                ("decode", s.answer_decode_s),
                ("request", s.answer_request_s),
            )
            if v
        ]
        answers = [f"      per-request metrics of {s.answers} answers: {', '.join(parts) or '-'}"]
    if s.source is None:
        where = f"{safe_name(s.url)}: " if s.url else ""
        return [f"    server: no metrics ({where}{safe_name(s.none or '-')})", *answers]

    def part(name: str, secs: float | None, share: float | None) -> str | None:
        return None if secs is None else f"{name} {secs:.2f} s ({fmt_pct(share)})"

    head = f"    server ({safe_name(s.source)}, {s.reads} reads of {safe_name(s.url)})"
    times = [
        p
        for p in (
            part("queue", s.queue_s, s.queue_share),
            part("prefill", s.prefill_s, s.prefill_share),
            part("decode", s.decode_s, s.decode_share),
        )
        if p
    ]
    if s.requests is not None and s.request_s is not None:
        head += f": {s.requests} requests, {s.request_s:.2f} s on it"
    out = [head + (": " + ", ".join(times) if times else "")]

    def mm(mx: float | None, mean: float | None) -> str:
        return "-" if mx is None or mean is None else f"max {mx:g} / mean {mean:.1f}"

    gauges = [f"running {mm(s.running_max, s.running_mean)}"]
    waiting = f"waiting {mm(s.waiting_max, s.waiting_mean)}"
    if s.after_first_reads:
        waiting += f" (after the first request: {mm(s.waiting_after_first_max, s.waiting_after_first_mean)})"
    gauges.append(waiting)
    if s.kv_max is not None:
        gauges.append(f"KV cache max {fmt_pct(s.kv_max)}")
    if s.preemptions is not None:
        gauges.append(f"preemptions {s.preemptions}")
    if s.ttft_mean_ms is not None:
        gauges.append(f"TTFT mean {s.ttft_mean_ms:.1f} ms")
    out.append("      " + ", ".join(gauges))
    return out + answers


def rollouts(r: RolloutReport) -> str:
    """The HTTP rollout requests: per endpoint requests, outcomes, latency, tokens,
    streams and in-flight figures, then the batches and their tail."""
    from gyreprof._support.format import fmt_bytes

    lines = [f"rollout requests ({r.requests} over {len(r.endpoints)} endpoint(s)):"]
    for e in r.endpoints:
        role = f"  ({e.role})" if e.role else ""  # a known server route's role
        lines.append(
            f"  {safe_name(e.endpoint)}  [{', '.join(safe_name(c) for c in e.clients)}]{role}"
        )
        outcomes = ", ".join(f"{k} {v}" for k, v in e.outcomes.items() if v)
        lines.append(f"    requests {e.requests}, attempts {e.attempts}: {outcomes or '-'}")
        if e.retries:
            why = ", ".join(f"{v} after {k}" for k, v in e.retried.items())
            lines.append(f"    retries {e.retries} ({why})")
        lines.append(
            f"    latency p50 / p90 / p99 / max: {_ms(e.latency, 'p50', 'p90', 'p99', 'max')}"
        )
        lines.append(f"    bytes in {fmt_bytes(e.bytes_in)}, out {fmt_bytes(e.bytes_out)}")
        if e.with_usage:
            tps = f", {e.tokens_per_s:,.0f} completion tokens/s" if e.tokens_per_s else ""
            lines.append(
                f"    tokens (usage of {e.with_usage} answers): prompt {e.prompt_tokens:,}, "
                f"completion {e.completion_tokens:,}{tps}"
            )
        if e.streams:
            lines.append(
                f"    streams {e.streams} ({e.chunks} chunks): time to first token p50 / p90 "
                f"{_ms(e.ttft, 'p50', 'p90')}, inter-chunk p50 / p90 {_ms(e.inter_chunk, 'p50', 'p90')}"
            )
        if e.in_flight_mean is not None:
            lines.append(
                f"    in flight: mean {e.in_flight_mean:.1f}, max {e.in_flight_max} "
                f"({fmt_pct(e.at_max_share)} of the time at max)"
            )
        if e.server is not None:
            lines += server_lines(e.server)
        if e.empty_fields:
            lines.append(
                "    empty answers read from: "
                + ", ".join(f"{safe_name(k)} ({v})" for k, v in e.empty_fields.items())
            )
        if e.not_json or e.oversized:
            lines.append(
                f"    bodies not scanned: {e.not_json} not JSON, {e.oversized} larger than the cap"
            )
    batch = batch_lines(r)
    if batch:
        lines += ["  " + batch[0], *("    " + b for b in batch[1:])]
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register(
    "text",
    phase_stats,
    warmup,
    summary_rows,
    summary_table,
    summary,
    window,
    rollouts,
    verdict_headline,
    verdict,
    wait_report,
    run_processes,
    run_report,
)
