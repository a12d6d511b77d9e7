"""Pictures: PNGs of the expected pixel size that are not blank, and clear errors."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="plots need the plot extra (matplotlib)")

import gyreprof as gp  # noqa: E402
from gyreprof.export import (  # noqa: E402
    plot_percentiles,
    plot_report,
    plot_shares,
    plot_windows,
)

from conftest import run_cli


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def _not_blank(path: Path) -> None:
    from matplotlib.image import imread

    img = imread(path)
    assert img.ndim == 3
    # a drawn chart has many distinct colours, not one flat fill
    rgb = (img[..., :3].reshape(-1, 3) * 255).astype(np.uint32)
    assert float(rgb.std()) > 5
    packed = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
    assert len(np.unique(packed)) > 20


@pytest.fixture(scope="module")
def prof() -> gp.Profiler:
    p = gp.Profiler(["env", "fwd", "xfer"], warmup_steps=20, window_steps=25)
    ids = p.ids()
    for i in range(200):
        p.begin()
        sum(range(400 if i % 50 else 4000))
        p.lap(ids[0])
        sum(range(40))
        p.lap(ids[1])
        p.lap(ids[2])
    p.end()
    return p


def test_percentile_plot(prof: gp.Profiler, tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    fig = plot_percentiles(prof, out)
    assert _png_size(out) == (1000, 600)
    _not_blank(out)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:3] == ["0%", "90%", "99%"]
    assert len(ax.get_lines()) == 4  # three phases and the whole step
    fig2 = plot_percentiles(
        prof, tmp_path / "small.png", phases=["fwd"], size_px=(640, 400), dpi=80, log_y=False
    )
    assert _png_size(tmp_path / "small.png") == (640, 400)
    assert len(fig2.axes[0].get_lines()) == 1


def test_window_series_and_shares(prof: gp.Profiler, tmp_path: Path) -> None:
    fig = plot_windows(prof, tmp_path / "w.png")
    assert _png_size(tmp_path / "w.png") == (1000, 600)
    _not_blank(tmp_path / "w.png")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 6  # p50 and p99 for each of three phases
    assert any(t.get_text() == "warm-up" for t in ax.get_legend().get_texts())
    plot_shares(prof, tmp_path / "s.png", size_px=(800, 500))
    assert _png_size(tmp_path / "s.png") == (800, 500)
    _not_blank(tmp_path / "s.png")
    # exact windows from the ring
    fig = plot_windows(prof, tmp_path / "w2.png", steps=40)
    assert "ring windows" in fig.axes[0].get_title()


def test_report_plot_and_own_axes(prof: gp.Profiler, tmp_path: Path) -> None:
    plot_report(prof, tmp_path / "r.png")
    assert _png_size(tmp_path / "r.png") == (1200, 1500)
    _not_blank(tmp_path / "r.png")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    assert plot_percentiles(prof, ax=ax) is fig
    assert len(ax.get_lines()) == 4


def test_snapshot_and_summary_files(prof: gp.Profiler, tmp_path: Path) -> None:
    snap = prof.snapshot().save(tmp_path / "run.snap")
    js = tmp_path / "run.json"
    prof.summary().to_json(js)
    plot_percentiles(snap, tmp_path / "snap.png", size_px=(500, 300))
    assert _png_size(tmp_path / "snap.png") == (500, 300)
    plot_shares(js, tmp_path / "js.png", size_px=(500, 300))  # rolling windows saved in JSON
    assert _png_size(tmp_path / "js.png") == (500, 300)
    ev = gp.export.save_events(prof, tmp_path / "run.npz")
    fig = plot_windows(ev, tmp_path / "ev.png", steps=50, size_px=(500, 300))
    assert "ring windows" in fig.axes[0].get_title()
    assert len(gp.export.plots.windows_of(ev, steps=50)) == 4  # 200 steps / 50


def test_cli_report_plot(prof: gp.Profiler, tmp_path: Path) -> None:
    snap = prof.snapshot().save(tmp_path / "run.snap")
    out = tmp_path / "cli.png"
    r = run_cli("report", str(snap), "--plot", str(out), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "steady steps" in r.stdout
    assert _png_size(out) == (1200, 1500)
    r = run_cli(
        "report", str(snap), "--plot", str(tmp_path / "no" / "such" / "dir.png"), timeout=60
    )
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_bad_input(prof: gp.Profiler, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nothing to export"):
        plot_percentiles(gp.Profiler(["env"]))
    short = gp.Profiler(["env"], window_steps=1000)
    for _ in range(5):
        short.begin()
        short.lap(0)
    short.end()
    with pytest.raises(ValueError, match="no windows to plot"):
        plot_windows(short)
    with pytest.raises(ValueError, match="no windows to plot"):
        plot_shares(short.snapshot())
    plot_report(short, tmp_path / "nowin.png")  # the percentile panel alone, with a note
    assert _png_size(tmp_path / "nowin.png") == (1200, 1500)
    with pytest.raises(ValueError, match="unknown phases"):
        plot_percentiles(prof, phases=["nope"])
    with pytest.raises(ValueError, match="size_px"):
        plot_percentiles(prof, size_px=(10, 10))
    with pytest.raises(ValueError, match="raw events"):
        plot_windows(prof.summary(), steps=10)
    bare = tmp_path / "bare.json"
    import json

    bare.write_text(json.dumps(prof.summary().to_dict(histograms=False)))
    with pytest.raises(ValueError, match="histograms"):
        plot_percentiles(bare)


def test_missing_matplotlib_says_which_extra(prof: gp.Profiler, tmp_path: Path) -> None:
    snap = prof.snapshot().save(tmp_path / "run.snap")
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from gyreprof.export import plot_percentiles\n"
        f"plot_percentiles({str(snap)!r})\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "gyreprof[plot]" in r.stderr
