"""A sweep result (:class:`gyreprof.analysis.sweep.result.SweepResult`) as text, CSV
and a plot: the sweep's renderer, apart from its data.

``SweepResult.report()``, ``headline()``, ``table()``, ``str()``, ``to_csv()`` and
``to_plot()`` each call one function here (imported where used: the sweep package
imports its result module, which would otherwise import this one mid-way).
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyreprof._support import forms as _forms
from gyreprof._support.format import (
    byte_unit,
    fmt_bytes,
    fmt_bytes_range,
    fmt_change_pct,
    fmt_count,
    fmt_ns,
    fmt_pct,
    plot_text,
    text_table,
)
from gyreprof.analysis.sweep.record import FIGURE_NAMES
from gyreprof.analysis.sweep.rule import noise
from gyreprof.analysis.sweep.words import fmt_value

if TYPE_CHECKING:  # the types are for annotations only
    from gyreprof.analysis.sweep.result import SweepPoint, SweepResult


def _is_script(result: SweepResult) -> bool:
    """A sweep of an unmodified script (``gyreprof sweep -- COMMAND``)."""
    return result.settings.get("kind") == "script"


def _verdict_of(p: SweepPoint) -> str:
    """A script sweep's verdict at one value: the side most runs were bound by, and the
    median wait ratio ('sampler, wait 62%'); '-' without one."""
    import statistics

    sides = [r.verdict_bound for r in p.runs if r.ok and r.verdict_bound]
    waits = [r.wait_ratio for r in p.runs if r.ok and r.wait_ratio is not None]
    if not sides and not waits:
        return "-"
    side = max(dict.fromkeys(sides), key=sides.count) if sides else "unknown"
    if len(set(sides)) > 1:
        side += " (" + "/".join(sorted(set(sides))) + ")"
    if waits:
        return f"{side}, wait {fmt_pct(statistics.median(waits))}"
    return side


def _fixed_words(result: SweepResult) -> str:
    if _is_script(result):
        env = ", ".join(f"{k}={v}" for k, v in result.fixed.items())
        return "with the rest of the command" + (f" and {env}" if env else "") + " fixed"
    if not result.fixed:
        return "with nothing else set (factory defaults)"
    return "with " + ", ".join(f"{k}={fmt_value(v)}" for k, v in result.fixed.items()) + " fixed"


# ------------------------------------------------------------------ report


def headline(result: SweepResult) -> str:
    """'with num_envs=8 fixed, batch_size 8 -> 64: 12.1k -> 38.4k samples/s (+217%), ...'."""
    param = result.param
    ok = [p for p in result.points if p.ok]
    fixed = _fixed_words(result)
    if not ok:
        tried = ", ".join(fmt_value(p.value) for p in result.points)
        return f"{fixed}, {param} {tried}: no value ran cleanly; no recommendation"
    first, last = ok[0], ok[-1]
    if first is last:
        parts = [
            f"{fixed}, {param} {fmt_value(first.value)}: {fmt_count(first.samples_per_s)} samples/s"
        ]
    else:
        change = last.samples_per_s / first.samples_per_s - 1.0 if first.samples_per_s else math.nan
        parts = [
            f"{fixed}, {param} {fmt_value(first.value)} -> {fmt_value(last.value)}: "
            f"{fmt_count(first.samples_per_s)} -> {fmt_count(last.samples_per_s)} samples/s "
            f"({fmt_change_pct(change)})"
        ]
    best = max(ok, key=lambda p: p.samples_per_s)
    if best is not first and best is not last:
        parts.append(f"best {fmt_count(best.samples_per_s)} at {fmt_value(best.value)}")
    if result.stop_reason == "flat" and result.flat_from is not None:
        stop_gain = None
        for p in result.points:
            if p.value == result.stopped_at:
                stop_gain = p.gain
        parts.append(f"flat from {fmt_value(result.flat_from)} ({fmt_change_pct(stop_gain)})")
    elif result.stop_reason == "memory_limit":
        parts.append(f"stopped at {fmt_value(result.stopped_at)} by memory_limit")
    mem = _memory_words(first, last)
    if mem:
        parts.append(mem)
    ga = first.figure("peak_gpu_bytes").median
    gb = last.figure("peak_gpu_bytes").median
    if not math.isnan(ga) and not math.isnan(gb):
        parts.append(f"peak GPU memory {fmt_bytes_range(ga, gb)}")
    rec = (
        f"recommended {fmt_value(result.recommended)}"
        if result.recommended is not None
        else "no recommendation"
    )
    return ", ".join(parts) + "; " + rec


def _has_workers(p: SweepPoint) -> bool:
    """The sampler's worker processes held a noticeable share of its memory."""
    own = p.figure("peak_rss_bytes").median
    tree = p.figure("peak_tree_rss_bytes").median
    return not math.isnan(tree) and not math.isnan(own) and tree - own > max(2**20, 0.02 * tree)


def _memory_words(first: SweepPoint, last: SweepPoint) -> str | None:
    """'peak RSS 0.9 -> 2.7 GiB' (the whole sampler), with the measuring process apart
    when worker processes held part of it."""

    def span(name: str) -> str | None:
        a, b = first.figure(name).median, last.figure(name).median
        if math.isnan(a) or math.isnan(b):
            return None
        return fmt_bytes_range(a, b) if first is not last else fmt_bytes(a)

    own = span("peak_rss_bytes")
    tree = span("peak_tree_rss_bytes")
    if tree is not None and (_has_workers(first) or _has_workers(last)):
        return f"peak RSS {tree} for the whole sampler ({own} in the measuring process)"
    return None if own is None else f"peak RSS {own}"


def _phase_shift(result: SweepResult) -> str | None:
    ok = [p for p in result.points if p.ok and p.phases]
    if len(ok) < 1:
        return None
    first, last = ok[0], ok[-1]
    names = [n for n in first.phases if n in last.phases]
    bits = []
    for n in names:
        a = first.phases[n].share.median
        b = last.phases[n].share.median
        if n == "(other)" and max(a, b) < 0.02:
            continue
        if first is last:
            bits.append(f"{n} {fmt_pct(a)}")
        else:
            bits.append(f"{n} {fmt_pct(a)} -> {fmt_pct(b)}")
    if not bits:
        return None
    span = (
        f"{result.param}={fmt_value(first.value)}"
        if first is last
        else f"{result.param} {fmt_value(first.value)} -> {fmt_value(last.value)}"
    )
    what = "the sampler's time" if _is_script(result) else "the call time"
    return f"Where {what} goes ({span}): " + ", ".join(bits) + "."


def report_text(result: SweepResult) -> str:
    param = result.param
    s = result.settings
    lines = [headline(result) + "."]
    how = "each run in a fresh process" if s.get("isolate") else "all runs in this process"
    reps = int(s.get("repeats", 1))
    if _is_script(result):
        lines.append(_script_measured(result, reps))
    else:
        steps, warm = int(s.get("steps", 0)), int(s.get("warmup", 0))
        lines.append(
            f"Measured: {steps} sampler call{'s' if steps != 1 else ''} per run after {warm} "
            f"warm-up call{'s' if warm != 1 else ''} (excluded, reported apart); "
            f"{reps} run{'s' if reps != 1 else ''} per value, "
            f"figures are medians with min-max; samples/s counts only time inside the "
            f"sampler calls; {how}."
        )
    lines.append(f"Stop: {result.stop_detail}.")
    rec = _recommendation_words(result)
    if rec:
        lines.append(rec)
    if _is_script(result) and result.measured:
        lines.append(
            "Verdict per value (the side the run was bound by; the trainer's wait ratio): "
            + "; ".join(f"{fmt_value(p.value)}: {_verdict_of(p)}" for p in result.measured)
            + "."
        )
    rules = sorted({r.count_rule for p in result.points for r in p.runs if r.ok and r.count_rule})
    if rules and not _is_script(result):
        lines.append(
            "Samples per call: each call's return value read as "
            + " / ".join(rules)
            + " (the rules gyreprof selfcheck uses too)."
        )
    if any(_has_workers(p) for p in result.measured):
        lines.append(
            "Memory: 'peak RSS' is the process that ran the sampler; 'tree RSS' adds its "
            "worker processes (polled while it ran); the stop rule and memory_limit judge "
            "the tree."
        )
    env = result.environment
    where = ""
    if env.get("host"):
        cpus = env.get("cpu_affinity") or env.get("cpu_count")
        where = f" on {env['host']}" + (f" ({cpus} CPUs usable)" if cpus else "")
    kept = (
        ", ".join(f"{k}={fmt_value(v)}" for k, v in result.fixed.items())
        if result.fixed
        else "no setting given explicitly"
    )
    if _is_script(result):
        lines.append(
            f"Controlled result: only {param} changed in: {s.get('command', result.factory)}"
            f"{where}. It holds for this command on this machine, not as a universal optimum."
        )
    else:
        lines.append(
            f"Controlled result: only {param} changed; fixed: {kept}; everything else at the "
            f"factory's defaults{where}. It holds for these settings on this machine, not as "
            "a universal optimum."
        )
    shift = _phase_shift(result)
    if shift:
        lines.append(shift)
    elif result.measured and not any(p.phases for p in result.measured) and not _is_script(result):
        lines.append(
            "No phase breakdown: give the factory a prof= keyword and declare its phases "
            "(factory.phases = ('env', 'policy')) to see where the call time moves."
        )
    for p in result.points:
        if not p.ok:
            lines.append(f"Failed: {param}={fmt_value(p.value)} ({p.status}): {p.error}")
    pairs = []
    for p in result.points:
        for n in p.not_distinguishable_from:
            pair = tuple(sorted((p.value, n)))
            if pair not in pairs:
                pairs.append(pair)
    if pairs:
        shown = ", ".join(f"{fmt_value(a)} vs {fmt_value(b)}" for a, b in pairs)
        lines.append(
            f"Not distinguishable (by the test above: the ratio is within flat_within and "
            f"the noise): {shown}."
        )
    lines.append(_NOTE_LEGEND)
    for w in result.warnings:
        lines.append(f"Warning: {w}")
    return "\n".join(lines)


def _script_measured(result: SweepResult, reps: int) -> str:
    s = result.settings
    bound = f"at most {float(s.get('max_s') or 0):g} s"
    if s.get("max_steps"):
        bound += f" or {int(s['max_steps'])} trainer steps"
    return (
        f"Measured: each run is the command under gyreprof run's launcher, stopped after "
        f"{bound} (SIGINT, then SIGTERM; what it recorded is kept) or at its own end; "
        f"{reps} run{'s' if reps != 1 else ''} per value in a fresh process each, figures "
        "are medians with min-max; samples/s counts the env steps of every process over "
        "the time the driving process spent in the sampler's phases (env steps, vector-env "
        "send and wait, the policy's forward), not start-up or the update; peak RSS is "
        "the main process, tree RSS the whole process tree."
    )


_NOTE_LEGEND = (
    "Note column: 'recommended' (the rule above), 'flat from here' (the stop rule found "
    "no gain past this value), 'stop (...)' (the last value tried, and why), 'over memory "
    "limit', a failure status (error, invalid, crash, timeout), '~16' (not distinguishable "
    "from the neighbour 16)."
)


def _recommendation_words(result: SweepResult) -> str | None:
    ok = [p for p in result.points if p.ok and not p.over_memory_limit and p.samples_per_s > 0]
    if result.recommended is None or not ok:
        return None
    param = result.param
    best = max(ok, key=lambda p: p.samples_per_s)
    fw = float(result.settings.get("flat_within", 0.05))
    nz = noise(result.points)
    lim = result.settings.get("memory_limit_bytes")
    under = f", under memory_limit={fmt_bytes(lim)}" if lim else ""
    rec = result.point(result.recommended)
    if rec is best:
        why = f"it has the best median throughput ({fmt_count(best.samples_per_s)} samples/s)"
        smaller = [p for p in ok if p.value < rec.value]
        if smaller:
            why += ", distinguishable from every smaller value"
    else:
        why = (
            f"the smallest value whose median ({fmt_count(rec.samples_per_s)} samples/s) is not "
            f"distinguishable from the best ({fmt_count(best.samples_per_s)} at "
            f"{fmt_value(best.value)})"
        )
    return (
        f"Recommended {param}={fmt_value(result.recommended)}: {why}{under}. Rule: the "
        f"smallest value not distinguishable from the best median; two medians are "
        f"distinguishable when the larger exceeds the smaller by more than flat_within "
        f"({fw:.0%}) and the sweep's noise ({nz:.0%}: twice the median relative min-max "
        f"spread of samples/s over the values) compounded, a factor of {(1 + fw) * (1 + nz):.3g}."
    )


def _note(result: SweepResult, p: SweepPoint) -> str:
    notes = []
    if p.value == result.recommended:
        notes.append("recommended")
    if (
        result.flat_from is not None
        and p.value == result.flat_from
        and p.value != result.recommended
    ):
        notes.append("flat from here")
    if p.value == result.stopped_at:
        notes.append(f"stop ({result.stop_reason.replace('_', ' ')})")
    if p.over_memory_limit:
        notes.append("over memory limit")
    if not p.ok:
        notes.append(p.status)
    if p.not_distinguishable_from:
        notes.append("~" + "/".join(fmt_value(v) for v in p.not_distinguishable_from))
    return ", ".join(notes)


def text(result: SweepResult) -> str:
    """What ``print(result)`` shows: the table, then the report."""
    return table_text(result) + "\n\n" + report_text(result)


def table_text(result: SweepResult) -> str:
    """Per-value table, then the per-phase breakdown when the sampler recorded phases."""
    gpu = any(not math.isnan(p.figure("peak_gpu_bytes").median) for p in result.points)
    script = _is_script(result)
    headers = [
        result.param,
        "samples/s",
        "min-max",
        "vs prev",
        *(("time/step", "step p50", "step p99") if script else ("call mean", "call p50")),
        *(() if script else ("call p99", "1st call")),
        "peak RSS",
        "tree RSS",
    ]
    if gpu:
        headers.append("GPU peak")
    if script:
        headers.append("verdict")
    headers.append("note")
    rows = []
    for p in result.points:
        f = p.figure
        if p.measured:
            row = [
                fmt_value(p.value),
                fmt_count(p.samples_per_s),
                f"{fmt_count(p.spread[0])}-{fmt_count(p.spread[1])}",
                fmt_change_pct(p.gain),
                fmt_ns(f("call_mean_ns").median),
                fmt_ns(f("call_p50_ns").median),
                fmt_ns(f("call_p99_ns").median),
                *(() if script else (fmt_ns(f("first_call_ns").median),)),
                fmt_bytes(f("peak_rss_bytes").median),
                fmt_bytes(p.memory_figure().median),
            ]
        else:
            row = [fmt_value(p.value), *(["-"] * (8 if script else 9))]
        if gpu:
            row.append(fmt_bytes(f("peak_gpu_bytes").median))
        if script:
            row.append(_verdict_of(p) if p.measured else "-")
        row.append(_note(result, p))
        rows.append(row)
    for v in result.skipped:
        rows.append([fmt_value(v), *(["-"] * (len(headers) - 2)), "not tried"])
    out = text_table(headers, rows)
    phased = [p for p in result.points if p.phases]
    if phased:
        names: list[str] = []
        for p in phased:
            for n in p.phases:
                if n not in names:
                    names.append(n)
        prows = []
        for p in phased:
            row = [fmt_value(p.value)]
            for n in names:
                ph = p.phases.get(n)
                row.append(
                    f"{fmt_ns(ph.per_call_ns.median)} {fmt_pct(ph.share.median)}" if ph else "-"
                )
            prows.append(row)
        out += (
            "\n\nsampler time per env step by phase (median; share of the sampler's time):\n"
            if script
            else "\n\nper-call time by phase (median; share of call time):\n"
        )
        out += text_table([result.param, *names], prows)
    return out


# ------------------------------------------------------------------ CSV


def csv_text(result: SweepResult) -> str:
    names: list[str] = []
    for p in result.points:
        for n in p.phases:
            if n not in names:
                names.append(n)
    header = [
        result.param,
        "status",
        "samples_per_s",
        "samples_per_s_min",
        "samples_per_s_max",
        "gain",
        "distinguishable",
        "over_memory_limit",
    ]
    figs = [n for n in FIGURE_NAMES if n != "samples_per_s"]
    for n in figs:
        header += [n, f"{n}_min", f"{n}_max"]
    for n in names:
        header += [f"phase:{n}:per_call_ns", f"phase:{n}:share"]
    header += ["recommended", "error"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for p in result.points:
        row: list[Any] = [
            p.value,
            p.status,
            p.samples_per_s,
            p.spread[0],
            p.spread[1],
            "" if p.gain is None else p.gain,
            p.distinguishable,
            p.over_memory_limit,
        ]
        for n in figs:
            f = p.figure(n)
            row += [f.median, f.min, f.max]
        for n in names:
            ph = p.phases.get(n)
            row += [ph.per_call_ns.median, ph.share.median] if ph else [math.nan, math.nan]
        row += [p.value == result.recommended, p.error or ""]
        w.writerow(row)
    return buf.getvalue()


# ------------------------------------------------------------------ plot


def plot(result: SweepResult, path: str | os.PathLike[str]) -> Path:
    """Throughput (median with min-max bars) and peak memory against the swept value."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ImportError(
            "SweepResult.to_plot needs matplotlib; install it with: pip install gyreprof[plot]"
        ) from None
    out = Path(path)
    fig = Figure(figsize=(8, 4.8), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    param = result.param
    meas = [p for p in result.points if p.measured]
    xs = [float(p.value) for p in meas]
    ys = [p.samples_per_s for p in meas]
    lo = [max(0.0, p.samples_per_s - p.spread[0]) for p in meas]
    hi = [max(0.0, p.spread[1] - p.samples_per_s) for p in meas]
    ax.errorbar(
        xs,
        ys,
        yerr=[lo, hi],
        marker="o",
        capsize=4,
        color="tab:blue",
        label="samples/s (median, min-max)",
    )
    all_x = [float(p.value) for p in result.points] + [float(v) for v in result.skipped]
    if all_x and min(all_x) > 0 and max(all_x) / min(all_x) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(all_x)
    ax.set_xticklabels(
        [plot_text(fmt_value(v)) for v in [p.value for p in result.points] + list(result.skipped)]
    )
    ax.set_xlabel(plot_text(param))
    ax.set_ylabel("samples / s (time inside sampler calls)", color="tab:blue")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: fmt_count(y)))
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    rss = [p.memory_figure() for p in meas]
    if any(not math.isnan(f.median) for f in rss):
        top = max((f.max for f in rss if not math.isnan(f.max)), default=1.0)
        size, unit = byte_unit(top)
        workers = any(_has_workers(p) for p in meas)
        ax2.plot(
            xs,
            [f.median / size for f in rss],
            "s--",
            color="tab:red",
            label=f"peak RSS, whole sampler ({unit})" if workers else f"peak RSS ({unit})",
        )
        if workers:
            own = [p.figure("peak_rss_bytes").median / size for p in meas]
            ax2.plot(
                xs, own, "o:", color="tab:orange", label=f"peak RSS, measuring process ({unit})"
            )
        ax2.fill_between(
            xs,
            [f.min / size for f in rss],
            [f.max / size for f in rss],
            color="tab:red",
            alpha=0.15,
        )
        gpu = [p.figure("peak_gpu_bytes") for p in meas]
        if any(not math.isnan(f.median) for f in gpu):
            ax2.plot(
                xs,
                [f.median / size for f in gpu],
                "^:",
                color="tab:purple",
                label=f"peak GPU memory ({unit})",
            )
        lim = result.settings.get("memory_limit_bytes")
        if lim:
            ax2.axhline(float(lim) / size, color="tab:red", lw=1, ls=":", label="memory_limit")
        ax2.set_ylabel(f"peak memory ({unit})", color="tab:red")
        ax2.set_ylim(bottom=0)
    failed = [p for p in result.points if not p.measured]
    if failed:
        ax.plot(
            [float(p.value) for p in failed],
            [0.0] * len(failed),
            "x",
            color="black",
            ms=10,
            mew=2,
            label="failed",
            clip_on=False,
        )
        for p in failed:
            ax.annotate(
                plot_text(p.status),
                (float(p.value), 0.0),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                fontsize=8,
            )
    if result.stopped_at is not None:
        ax.axvline(
            float(result.stopped_at),
            color="gray",
            ls=":",
            lw=1.5,
            label=f"stop: {result.stop_reason.replace('_', ' ')}",
        )
    if result.recommended is not None:
        rp = next(p for p in result.points if p.value == result.recommended)
        ax.plot(
            [float(rp.value)],
            [rp.samples_per_s],
            marker="*",
            ms=16,
            color="gold",
            mec="black",
            ls="none",
            label=f"recommended {fmt_value(rp.value)}",
        )
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="lower right", fontsize=8)
    fixed = plot_text(", ".join(f"{k}={fmt_value(v)}" for k, v in result.fixed.items()))
    ax.set_title(f"{plot_text(param)} sweep" + (f" ({fixed} fixed)" if fixed else ""), fontsize=10)
    fig.tight_layout()
    ext = out.suffix.lstrip(".").lower()
    buf = io.BytesIO()
    fig.savefig(buf, format=ext if ext in ("png", "svg", "pdf") else "png")
    from gyreprof._support import io as _io

    _io.write_atomic(out, buf.getvalue())  # never through a planted link
    return out


# the result classes find these by name (gyreprof._support.forms): they sit below this floor
_forms.register("sweep", report_text, headline, table_text, text, csv_text, plot)
