"""A self-contained HTML report: summary table, warm-up, overhead and pictures in one file.

Everything is inline -- CSS in a ``<style>`` block, pictures as base64 PNG data
URIs, no scripts, no external links -- so the file opens offline, from an
e-mail attachment or a CI artifact. Needs the ``plot`` extra (matplotlib).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import os
from pathlib import Path
from typing import Any

from gyreprof._support import io as _io
from gyreprof._support import notes as _notes
from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import fmt_ns, fmt_pct, safe_name
from gyreprof._version import __version__
from gyreprof.export._source import Resolved, resolve, rows
from gyreprof.model.histogram import STEP
from gyreprof.model.snapshot import Snapshot
from gyreprof.model.summary import Summary
from gyreprof.render import text as render_text

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.sub { color: #666; font-size: 0.9em; }
.headline { font-size: 1.1em; margin: 0.8em 0; }
table { border-collapse: collapse; margin: 0.5em 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f5f5f5; }
tr.step td { font-weight: bold; border-top: 1px solid #bbb; }
.note { background: #fff6d5; border-left: 4px solid #f2c14e; padding: 0.4em 0.8em; }
img { max-width: 100%; height: auto; border: 1px solid #eee; margin: 0.5em 0; }
footer { margin-top: 2em; color: #888; font-size: 0.8em; }
"""


def _e(text: Any) -> str:
    # control characters in a name become visible escapes, then HTML-escaped
    return html.escape(safe_name(text), quote=True)


def _table(headers: list[str], body: list[list[str]], row_classes: list[str] | None = None) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>"]
    for i, r in enumerate(body):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _summary_table(s: Summary, shares: tuple[dict[str, float], str] | None = None) -> str:
    # the same cells as the text and Markdown tables (gyreprof.render.text); ``shares``
    # (render.text.wall_shares): the share column is of the sampler's wall time
    if shares is None:
        classes = ["step" if name == STEP else "" for name, _ in render_text.phase_rows(s)]
        return _table(list(render_text.SUMMARY_HEADERS), render_text.summary_rows(s), classes)
    cells = render_text.wall_rows(s, shares[0])
    classes = ["step" if row[0] == STEP else "" for row in cells]
    table = _table(list(render_text.SUMMARY_HEADERS), cells, classes)
    return table + f"\n<p>{_e(render_text.wall_basis(shares[1]))}</p>"


def _warmup_section(s: Summary) -> str:
    w = s.warmup
    parts = [f"<p>{_e(w)}</p>"]
    names = [n for n in [*s.phases, STEP] if n in w.first_ns or n in w.mean_ns]
    if names:
        body = []
        for n in names:
            steady = s.phases[n].mean if n in s.phases else s.step.mean
            body.append(
                [
                    n,
                    fmt_ns(w.first_ns.get(n)),
                    fmt_ns(w.mean_ns.get(n)),
                    fmt_ns(w.max_ns.get(n)),
                    fmt_ns(steady),
                ]
            )
        parts.append(
            _table(["phase", "first call", "warm-up mean", "warm-up max", "steady mean"], body)
        )
    return "\n".join(parts)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _pictures(
    res: Resolved,
    steps: int | None,
    seconds: float | None,
    size_px: tuple[int, int],
    finished: bool = False,
) -> list[str]:
    from gyreprof.export import plots

    out = []
    src = res.snapshot or res.summary
    if any(st.count for _, st in rows(res.summary)):
        fig = plots.plot_percentiles(src, size_px=size_px)
        out.append(_img(plots.figure_png(fig), "duration by percentile per phase"))
    wins = plots.windows_of(plots._richest(res), steps=steps, seconds=seconds)
    if wins:
        fig = plots.plot_windows(wins, size_px=size_px)
        out.append(_img(plots.figure_png(fig), "p50 and p99 per phase per window"))
        fig = plots.plot_shares(wins, size_px=size_px)
        out.append(_img(plots.figure_png(fig), "share of step time per phase per window"))
    elif finished:  # a finished run: nothing more will close
        out.append(
            '<p class="sub">No time series: no window closed in these numbers (windows '
            "close every window_steps marked steps and when warm-up ends).</p>"
        )
    else:
        out.append(
            '<p class="sub">No window closed yet, so no time series: windows close every '
            "window_steps steps and when warm-up ends.</p>"
        )
    return out


def _verdict_section(v: Any) -> list[str]:
    """The verdict as the text words it: headline, numbered reasons, then its lists."""
    out = [
        "<h2>Verdict</h2>",
        f'<p class="headline"><b>{_e(render_text.verdict_headline(v))}</b></p>',
    ]
    if v.reasons:
        out.append("<ol>" + "".join(f"<li>{_e(r)}</li>" for r in v.reasons) + "</ol>")
    for heading, items in render_text.verdict_sections(v):
        if items:
            out.append(f"<p>{_e(heading)}</p>")
            out.append("<ul>" + "".join(f"<li>{_e(x)}</li>" for x in items) + "</ul>")
    if v.sampler_shares:
        out.append(f"<p>the sampler's wall time (from {_e(v.sampler_wall or '-')}):</p>")
        out.append(
            _table(
                ["phase", "share of the sampler's wall time"],
                [[n, fmt_pct(x)] for n, x in v.sampler_shares.items()],
            )
        )
    return out


def _held(side: Any) -> Any:
    """A run's side as ``resolve`` takes it: a summary held where a snapshot would be (a
    report read back from ``gyreprof run --json``) is that summary."""
    if side is None or isinstance(side, (Snapshot, Summary)) or not hasattr(side, "summary"):
        return side
    summary = side.summary() if callable(side.summary) else None
    return summary if isinstance(summary, Summary) else side


def _trainer_section(trainer: Any, wait: Any) -> list[str]:
    """The trainer's table and its wait report (the text's lines)."""
    out = ["<h2>Trainer (wait: collecting / waiting for a batch; compute: the update)</h2>"]
    if trainer is not None:
        t = resolve(trainer, what="an HTML report's trainer").summary
        out.append(f'<p class="headline">{_e(render_text.summary_headline(t))}</p>')
        out.append(_summary_table(t))
    if wait is not None:
        lines = render_text.wait_report(wait).splitlines()
        out.append("<ul>" + "".join(f"<li>{_e(x)}</li>" for x in lines) + "</ul>")
    return out


def html_report(
    source: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    verdict: Any = None,
    trainer: Any = None,
    wait: Any = None,
    steps: int | None = None,
    seconds: float | None = None,
    size_px: tuple[int, int] = (1000, 560),
) -> str | Path:
    """A self-contained HTML page of a run; written to ``path`` (returns the Path) or returned.

    ``source``: a Profiler, Snapshot, Summary or the path of a saved one (the sampler's
    side, or the only profile), or a ``gyreprof run`` RunReport: its merged sampler, its
    trainer, wait report, verdict and processes, as its text words them.
    ``verdict=`` (a Verdict), ``trainer=`` (the trainer's profile) and ``wait=`` (its
    WaitReport; default the verdict's) add the verdict, the trainer's table and the wait
    ratio. ``steps=``/``seconds=`` (live Profiler): exact windows from the ring for the
    time series instead of the rolling windows. Needs the ``plot`` extra.
    """
    from gyreprof.analysis.run import RunReport
    from gyreprof.export.plots import _mpl

    _mpl()
    run = source if isinstance(source, RunReport) else None
    if run is not None and run.sampler is None and run.trainer is None and run.rollouts:
        return _rollouts_page(run, path, title, size_px)
    if run is not None:
        verdict = verdict if verdict is not None else run.verdict
        trainer = trainer if trainer is not None else run.trainer
        wait = wait if wait is not None else run.wait
        source = run.sampler if run.sampler is not None else run.trainer
        source = _held(source)
        trainer = _held(trainer)
        if source is None:
            raise InvalidValueError("the run recorded no sampler or trainer phases to show")
        if run.sampler is None:
            trainer = None  # the trainer is the page's main table already
    if wait is None and verdict is not None:
        wait = verdict.wait_report
    res = resolve(source, what="an HTML report")
    s = res.summary
    label = s.meta.get("label")
    title = title or (f"gyreprof report: {label}" if label else "gyreprof report")
    who = []
    for key in ("label", "host", "pid"):
        if key in s.meta:
            who.append(f"{key} {s.meta[key]}")
    if s.sources > 1:
        who.append(f"merged from {s.sources} sources")
    now = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    headline = render_text.summary_headline(s)
    overhead = render_text.overhead_line(s, figures=True)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="sub">{_e(", ".join(who) or s.clock)} &middot; {_e(now)}</div>',
        f'<p class="headline">{_e(headline)}</p>',
    ]
    if run is not None:
        parts.append(f"<p>processes: {_e(render_text.run_processes(run))}</p>")
    if verdict is not None:
        parts += _verdict_section(verdict)
    roles, parallel = render_text.sampler_role_parts(run) if run is not None else ([], [])
    if roles:  # per process role, as the text shows them
        for head, headers, rows in roles:
            parts += [f"<h2>{_e(head[:1].upper() + head[1:])}</h2>", _table(headers, rows)]
        parts.append("<p>" + "<br>".join(_e(x) for x in parallel) + "</p>")
        parts.append(f"<p>{_e(overhead)}</p>")
    elif run is not None and run.sampler is not None:
        n = render_text.merged_count(run)
        parts.append(f"<h2>Sampler phases, merged over {n} process{'es' if n != 1 else ''}</h2>")
        shares = render_text.wall_shares(s, verdict)
        parts += [_summary_table(s, shares), f"<p>{_e(overhead)}</p>"]
    else:
        parts.append("<h2>Summary (steady state)</h2>")
        parts += [_summary_table(s), f"<p>{_e(overhead)}</p>"]
    notes = _notes.data_quality(s)
    if notes:
        parts.append('<p class="note">' + "<br>".join(_e(n) for n in notes) + "</p>")
    parts += ["<h2>Warm-up</h2>", _warmup_section(s)]
    if s.counters:
        parts.append("<h2>Counters</h2>")
        parts.append(
            _table(
                ["counter", "count", "per second"],
                [
                    [k, str(v), render_text.rate_cell(s.counter_rates.get(k))]
                    for k, v in s.counters.items()
                ],
            )
        )
    if trainer is not None or wait is not None:
        parts += _trainer_section(trainer, wait)
    if run is not None and run.notes:
        parts.append('<p class="note">' + "<br>".join(_e(n) for n in run.notes) + "</p>")
    if run is not None and getattr(run, "rollouts", None) is not None:
        parts += _rollouts_section(run.rollouts, size_px)
    parts.append("<h2>Pictures</h2>")
    parts += _pictures(res, steps, seconds, size_px, finished=run is not None)
    parts.append(f"<footer>gyreprof {_e(__version__)}</footer></body></html>")
    text = "\n".join(parts) + "\n"
    if path is None:
        return text
    p = Path(path)
    _io.write_atomic(p, text.encode("utf-8"))
    return p


# ------------------------------------------------------------------ rollouts


def _rollouts_section(r: Any, size_px: tuple[int, int]) -> list[str]:
    """The HTTP rollout requests (RolloutReport): the text's lines per endpoint, a
    concurrency-over-time plot per endpoint and the tail share of each batch."""
    lines = render_text.rollouts(r).splitlines()
    out = [
        "<h2>Rollout requests</h2>",
        f'<p class="headline">{_e(lines[0])}</p>',
        "<pre>" + "\n".join(_e(x) for x in lines[1:]) + "</pre>",
    ]
    for e in r.endpoints:
        if len(e.concurrency) >= 2:
            out.append(_img(_concurrency_png(e, size_px), f"requests in flight: {e.endpoint}"))
    if r.batches:
        out.append(_img(_tail_png(r, size_px), "batch wall time and tail share"))
    return out


def _figure(size_px: tuple[int, int]) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    dpi = 100
    fig = Figure(figsize=(size_px[0] / dpi, size_px[1] / 2 / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def _concurrency_png(e: Any, size_px: tuple[int, int]) -> bytes:
    from gyreprof.export.plots import figure_png

    fig = _figure(size_px)
    ax = fig.add_subplot(1, 1, 1)
    ts = [p[0] for p in e.concurrency]
    ns = [p[1] for p in e.concurrency]
    ax.step(ts, ns, where="post", color="#3465a4")
    ax.fill_between(ts, ns, step="post", alpha=0.25, color="#3465a4")
    ax.set_xlabel("seconds from the first request")
    ax.set_ylabel("requests in flight")
    ax.set_title(
        f"{safe_name(e.endpoint)}: mean {e.in_flight_mean or 0:.1f}, max {e.in_flight_max}"
    )
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    return figure_png(fig)


def _tail_png(r: Any, size_px: tuple[int, int]) -> bytes:
    from gyreprof.export.plots import figure_png

    fig = _figure(size_px)
    ax = fig.add_subplot(1, 1, 1)
    bs = sorted(r.batches, key=lambda b: b.start_ns)
    t0 = bs[0].start_ns
    xs = [(b.start_ns - t0) / 1e9 for b in bs]
    ax.bar(
        xs,
        [b.wall_ms for b in bs],
        width=0.8 * (max(xs) - min(xs) or 1) / max(1, len(xs)),
        color="#cccccc",
        label="batch wall time (ms)",
    )
    ax.set_ylabel("batch wall time (ms)")
    ax.set_xlabel("seconds from the first batch (the slowest batches)")
    ax2 = ax.twinx()
    ax2.plot(xs, [b.tail_share * 100 for b in bs], "o", color="#cc0000", label="tail share (%)")
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("tail share (%): waiting for the last 10%")
    ax.set_title("batches: wall time and tail share")
    fig.tight_layout()
    return figure_png(fig)


def _rollouts_page(
    run: Any, path: str | os.PathLike[str] | None, title: str | None, size_px: tuple[int, int]
) -> str | Path:
    """The page of a run that made HTTP rollout requests and timed no phase."""
    title = title or "gyreprof report"
    now = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="sub">{_e(now)}</div>',
        f"<p>processes: {_e(render_text.run_processes(run))}</p>",
    ]
    parts += _rollouts_section(run.rollouts, size_px)
    if run.notes:
        parts.append('<p class="note">' + "<br>".join(_e(n) for n in run.notes) + "</p>")
    parts.append(f"<footer>gyreprof {_e(__version__)}</footer></body></html>")
    text = "\n".join(parts) + "\n"
    if path is None:
        return text
    p = Path(path)
    _io.write_atomic(p, text.encode("utf-8"))
    return p


__all__ = ["html_report"]
