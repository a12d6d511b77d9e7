"""Pictures of a run (matplotlib, headless; the ``plot`` extra).

- :func:`plot_percentiles`: duration by percentile per phase, x on HdrHistogram's
  ``1/(1-q)`` tail axis so 99%, 99.9% and 99.99% get equal room;
- :func:`plot_windows`: p50 / p99 per phase over the run, warm-up shaded;
- :func:`plot_shares`: share of step time per phase, one stacked bar per window;
- :func:`plot_report`: the three stacked in one picture (``gyreprof report --plot``).

Every function returns the matplotlib ``Figure`` (built without pyplot, so no
global state and no display needed) and writes a PNG when given ``path``; the
PNG is exactly ``size_px`` pixels. Pass ``ax=`` to draw into your own axes.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError
from gyreprof._support.format import plot_text
from gyreprof.export._source import Resolved, require_histograms, resolve
from gyreprof.model.histogram import STEP
from gyreprof.model.window import Window

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
_WARM_COLOR = "#f2c14e"


def _mpl() -> Any:
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError:
        raise ImportError(
            "gyreprof's plots need matplotlib: pip install 'gyreprof[plot]'"
        ) from None
    return matplotlib


def _new_figure(size_px: tuple[int, int], dpi: int) -> Figure:
    _mpl()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    try:
        w, h = (int(v) for v in size_px)
    except (TypeError, ValueError):
        raise InvalidValueError(
            f"size_px must be (width, height) in pixels, got {size_px!r}"
        ) from None
    if w < 100 or h < 100 or w > 20000 or h > 20000:
        raise InvalidValueError(
            f"size_px must be between 100 and 20000 pixels a side, got {size_px!r}"
        )
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 10 <= dpi <= 1000:
        raise InvalidValueError(f"dpi must be an int in 10..1000, got {dpi!r}")
    fig = Figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def _finish(fig: Figure, path: str | os.PathLike[str] | None) -> Figure:
    if path is not None:
        from gyreprof._support.io import write_atomic

        write_atomic(Path(path), figure_png(fig))
    return fig


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a figure (its own size and dpi)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=fig.dpi, format="png")
    return buf.getvalue()


def _unit(max_ns: float) -> tuple[float, str]:
    for scale, name in _UNITS:
        if max_ns >= scale:
            return scale, name
    return 1.0, "ns"


def _pick(names: Sequence[str], phases: Sequence[str] | None) -> list[str]:
    if phases is None:
        return list(names)
    unknown = [p for p in phases if p not in names]
    if unknown:
        raise InvalidValueError(f"unknown phases {unknown}; known phases: {list(names)}")
    return list(phases)


def _setup_ax(ax: Any, size_px: tuple[int, int], dpi: int) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = _new_figure(size_px, dpi)
    return fig, fig.add_subplot(1, 1, 1)


# ----------------------------------------------------------------- percentiles


def _tail_ticks(n: int) -> tuple[list[float], list[str]]:
    """Ticks of the 1/(1-q) axis up to the first power of ten at or above ``n``."""
    ticks, labels = [1.0], ["0%"]
    k = 1
    while True:
        ticks.append(float(10**k))
        labels.append(f"{100 - 100 / 10**k:.{max(0, k - 2)}f}%")
        if 10**k >= n:
            return ticks, labels
        k += 1


def plot_percentiles(
    source: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    phases: Sequence[str] | None = None,
    include_step: bool = True,
    log_y: bool | None = None,
    ax: Any = None,
    size_px: tuple[int, int] = (1000, 600),
    dpi: int = 100,
    title: str | None = "Duration by percentile (steady state)",
) -> Figure:
    """Duration by percentile per phase on a log-scaled ``1/(1-q)`` axis (HDR style).

    ``log_y``: log-scaled durations (default: when the phases differ by more than 50x).
    """
    _mpl()
    res = resolve(source, what="a percentile plot")
    s = res.summary
    require_histograms(s, "a percentile plot")
    names = _pick(list(s.phases), phases)
    rows = [(n, s.phases[n]) for n in names]
    if include_step and phases is None and s.step.count:
        rows.append((STEP, s.step))
    rows = [(n, st) for n, st in rows if st.count > 0]
    if not rows:
        raise InvalidValueError(
            "nothing to plot: no steady-state durations yet (still in warm-up, or nothing recorded)"
        )
    fig, ax = _setup_ax(ax, size_px, dpi)
    n_max = max(st.count for _, st in rows)
    scale, unit = _unit(max(st.max for _, st in rows))
    for name, st in rows:
        x = np.unique(np.logspace(0.0, math.log10(max(st.count, 2)), 240))
        q = 100.0 * (1.0 - 1.0 / x)
        y = np.array([st.percentile(float(v)) for v in q]) / scale
        style = {"color": "black", "linestyle": "--", "linewidth": 1.4} if name == STEP else {}
        ax.plot(
            x,
            y,
            label=f"{plot_text(name)}  (p99 {st.p99 / scale:.3g} {unit}, n={st.count})",
            **style,
        )
    ticks, labels = _tail_ticks(n_max)
    ax.set_xscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels)
    ax.minorticks_off()
    ax.set_xlim(1.0, ticks[-1])
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"duration ({unit})")
    lows = [st.min for _, st in rows if st.min > 0]
    if log_y is None:
        log_y = bool(lows) and max(st.max for _, st in rows) / min(lows) > 50
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    if ax.figure is fig:
        fig.tight_layout()
    return _finish(fig, path)


# --------------------------------------------------------------------- windows


def windows_of(
    source: Any, *, steps: int | None = None, seconds: float | None = None
) -> list[Window]:
    """The windows to draw.

    A list of Window is taken as is. Otherwise the source's rolling windows, or
    with ``steps=``/``seconds=`` exact windows cut from the raw events of a live
    Profiler or an events file (a saved file is read first).
    """
    if isinstance(source, (list, tuple)):
        if not all(isinstance(w, Window) for w in source):
            raise ArgumentTypeError("a list source must hold gyreprof Window objects")
        return list(source)
    res = resolve(source, what="a window plot", allow_empty=True)
    if steps is not None or seconds is not None:
        if res.profiler is not None:
            return res.profiler.windows(steps=steps, seconds=seconds)
        if res.events is not None:
            from gyreprof.model.window import windows_from_events

            ef = res.events
            ev = ef.events[np.argsort(ef.events["start_ns"], kind="stable")]
            return windows_from_events(
                ev,
                ef.phases,
                steps=steps,
                seconds=seconds,
                warmup_end_step=ef.snapshot.times.warmup_end_step,
                still_warming=ef.warmup and not ef.steady_start_ns,
            )
        raise InvalidValueError(
            "steps=/seconds= cut windows from the raw events, which only a live Profiler or "
            "an events file (save_events) holds; from a snapshot or summary the rolling "
            "windows are drawn (leave both out)"
        )
    return list(res.summary.windows)


def _richest(res: Resolved) -> Any:
    """The most informative object behind a resolved source (to resolve it again cheaply)."""
    return res.profiler or res.events or res.snapshot or res.summary


def _need_windows(wins: list[Window]) -> None:
    if not wins:
        raise InvalidValueError(
            "no windows to plot: the run closed no rolling window yet (one closes every "
            "window_steps steps and when warm-up ends); run longer, lower "
            "Profiler(window_steps=...), or pass steps=N to cut windows from the ring"
        )


def _phase_names(wins: list[Window], phases: Sequence[str] | None) -> list[str]:
    names: list[str] = []
    for w in wins:
        for n in w.phases:
            if n not in names:
                names.append(n)
    return _pick(names, phases)


def _shade_warmup(ax: Any, wins: list[Window], t0: int) -> None:
    spans: list[list[float]] = []
    for w in wins:
        if not w.warmup:
            continue
        a, b = (w.start_ns - t0) / 1e9, (w.end_ns - t0) / 1e9
        if spans and a <= spans[-1][1] + 1e-12:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    for i, (a, b) in enumerate(spans):
        ax.axvspan(a, b, color=_WARM_COLOR, alpha=0.25, lw=0, label="warm-up" if i == 0 else None)


def _window_plot(
    source: Any,
    steps: int | None,
    seconds: float | None,
    phases: Sequence[str] | None,
    ax: Any,
    size_px: tuple[int, int],
    dpi: int,
) -> tuple[list[Window], list[str], Figure, Any, int]:
    """What every per-window plot starts with: the windows, the phases to draw, the
    axes, and the time origin (ns)."""
    _mpl()
    wins = windows_of(source, steps=steps, seconds=seconds)
    _need_windows(wins)
    names = _phase_names(wins, phases)
    fig, ax = _setup_ax(ax, size_px, dpi)
    return wins, names, fig, ax, min(w.start_ns for w in wins)


def plot_windows(
    source: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    phases: Sequence[str] | None = None,
    log_y: bool | None = None,
    ax: Any = None,
    size_px: tuple[int, int] = (1000, 600),
    dpi: int = 100,
    title: str | None = "p50 (solid) and p99 (dashed) per window",
) -> Figure:
    """p50 and p99 per phase over time, one point per window, warm-up windows shaded."""
    wins, names, fig, ax, t0 = _window_plot(source, steps, seconds, phases, ax, size_px, dpi)
    x = np.array([((w.start_ns + w.end_ns) / 2 - t0) / 1e9 for w in wins])
    vals = [
        v
        for w in wins
        for n in names
        if n in w.phases
        for v in (w.phases[n].p50, w.phases[n].p99)
        if not math.isnan(v) and v > 0
    ]
    if not vals:
        raise InvalidValueError("no durations in any window to plot")
    scale, unit = _unit(max(vals))
    colors = [f"C{i % 10}" for i in range(len(names))]
    marker = "o" if len(wins) <= 60 else None
    for name, color in zip(names, colors, strict=True):
        p50 = np.array([w.phases[name].p50 if name in w.phases else np.nan for w in wins]) / scale
        p99 = np.array([w.phases[name].p99 if name in w.phases else np.nan for w in wins]) / scale
        ax.plot(x, p50, color=color, marker=marker, markersize=3, label=f"{plot_text(name)} p50")
        ax.plot(
            x,
            p99,
            color=color,
            linestyle="--",
            marker=marker,
            markersize=3,
            label=f"{plot_text(name)} p99",
        )
    _shade_warmup(ax, wins, t0)
    if log_y is None:
        log_y = max(vals) / max(min(vals), 1e-9) > 50
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("time since first window start (s); points at window middles")
    ax.set_ylabel(f"duration ({unit})")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small", ncol=2)
    if title:
        ax.set_title(title + f" ({wins[0].source} windows)")
    if ax.figure is fig:
        fig.tight_layout()
    return _finish(fig, path)


def _shares(w: Window, names: list[str]) -> list[float]:
    sh = [w.phases[n].share if n in w.phases else math.nan for n in names]
    if all(math.isnan(v) for v in sh):
        # no steps marked: share of the phases' total time instead
        tot = [w.phases[n].count * w.phases[n].mean if n in w.phases else 0.0 for n in names]
        tot = [0.0 if math.isnan(v) else v for v in tot]
        s = sum(tot)
        return [v / s if s > 0 else 0.0 for v in tot]
    return [0.0 if math.isnan(v) else v for v in sh]


def plot_shares(
    source: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    phases: Sequence[str] | None = None,
    ax: Any = None,
    size_px: tuple[int, int] = (1000, 600),
    dpi: int = 100,
    title: str | None = "Share of step time per window",
) -> Figure:
    """One stacked bar per window: each phase's share of step time (and the rest)."""
    wins, names, fig, ax, t0 = _window_plot(source, steps, seconds, phases, ax, size_px, dpi)
    left = np.array([(w.start_ns - t0) / 1e9 for w in wins])
    width = np.array([max(w.end_ns - w.start_ns, 1) / 1e9 for w in wins])
    shares = np.array([_shares(w, names) for w in wins])  # windows x phases
    bottom = np.zeros(len(wins))
    hatch = ["//" if w.warmup else None for w in wins]
    for j, name in enumerate(names):
        bars = ax.bar(
            left,
            shares[:, j],
            width=width,
            bottom=bottom,
            align="edge",
            color=f"C{j % 10}",
            edgecolor="white",
            linewidth=0.3,
            label=plot_text(name),
        )
        for b, h in zip(bars, hatch, strict=True):
            if h:
                b.set_hatch(h)
                b.set_alpha(0.6)
        bottom += shares[:, j]
    rest = np.clip(1.0 - bottom, 0.0, None)
    has_steps = np.array([w.step is not None and w.step.count > 0 for w in wins])
    rest = np.where(has_steps, rest, 0.0)
    if rest.max() > 1e-3:
        ax.bar(
            left,
            rest,
            width=width,
            bottom=bottom,
            align="edge",
            color="#cccccc",
            edgecolor="white",
            linewidth=0.3,
            label="not in a phase",
        )
    if any(w.warmup for w in wins):
        ax.bar([np.nan], [np.nan], color="white", edgecolor="grey", hatch="//", label="warm-up")
    ax.set_ylim(0, max(1.0, float((bottom + rest).max())) * 1.02)
    ax.set_xlim(0, float((left + width).max()))
    ax.yaxis.set_major_formatter(_percent_formatter())
    ax.set_xlabel("time since first window start (s)")
    ax.set_ylabel("share of step time")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    if title:
        ax.set_title(title)
    if ax.figure is fig:
        fig.tight_layout()
    return _finish(fig, path)


def _percent_formatter() -> Any:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(xmax=1.0)


# ---------------------------------------------------------------------- report


def plot_report(
    source: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    size_px: tuple[int, int] = (1200, 1500),
    dpi: int = 100,
) -> Figure:
    """Percentiles, window series and phase shares in one picture.

    The window panels are left out (with a note) when the run has no windows.
    """
    _mpl()
    res = resolve(source, what="a report plot")
    wins = windows_of(_richest(res), steps=steps, seconds=seconds)
    fig = _new_figure(size_px, dpi)
    if wins:
        axes = fig.subplots(3, 1, gridspec_kw={"height_ratios": [1.2, 1, 1]})
        plot_percentiles(res.snapshot or res.summary, ax=axes[0])
        plot_windows(wins, ax=axes[1])
        plot_shares(wins, ax=axes[2])
    else:
        ax = fig.add_subplot(1, 1, 1)
        plot_percentiles(res.snapshot or res.summary, ax=ax)
        fig.text(
            0.5,
            0.005,
            "no windows closed yet: window plots left out",
            ha="center",
            fontsize="small",
            color="grey",
        )
    label = res.summary.meta.get("label")
    fig.suptitle(f"gyreprof report{f': {plot_text(label)}' if label else ''}")
    fig.tight_layout()
    return _finish(fig, path)


__all__ = [
    "figure_png",
    "plot_percentiles",
    "plot_report",
    "plot_shares",
    "plot_windows",
    "windows_of",
]
