"""The self-contained HTML report: content, no outside resources, and headless Chromium."""

from __future__ import annotations

import base64
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the HTML report needs the plot extra (matplotlib)")

import gyreprof as gp  # noqa: E402
from gyreprof.export import html_report  # noqa: E402

from conftest import run_cli

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class _Refs(HTMLParser):
    """Collects every URL the page would load and the text of table cells."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.imgs: list[str] = []
        self.cells: list[str] = []
        self._in_cell = False
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v is not None:
                self.urls.append(v)
                if tag == "img":
                    self.imgs.append(v)
        self._in_cell = tag in ("td", "th")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells.append(data)


@pytest.fixture(scope="module")
def prof() -> gp.Profiler:
    p = gp.Profiler(["env", "fwd"], warmup_steps=10, window_steps=20, label="<sampler&1>")
    for i in range(120):
        p.begin()
        sum(range(300 if i % 40 else 3000))
        p.lap(0)
        p.lap(1)
    p.end()
    p.count("retry", 2)
    return p


def _parse(text: str) -> _Refs:
    refs = _Refs()
    refs.feed(text)
    refs.close()
    return refs


def test_content_is_self_contained(prof: gp.Profiler, tmp_path: Path) -> None:
    out = html_report(prof, tmp_path / "r.html")
    assert out == tmp_path / "r.html"
    text = out.read_text()
    refs = _parse(text)
    assert "script" not in refs.tags
    assert refs.urls and all(u.startswith("data:image/png;base64,") for u in refs.urls)
    assert len(refs.imgs) == 3  # percentiles, window series, shares
    for u in refs.imgs:
        png = base64.b64decode(u.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", png[16:24]) == (1000, 560)
    s = prof.summary()
    assert {"env", "fwd", "(step)", "count", "p99"} <= set(refs.cells)
    assert str(s.phases["env"].count) in refs.cells
    assert "warm-up: first 10 steps excluded" in text
    assert re.search(r"profiler overhead: \d+\.\d% of wall time", text)
    assert "retry" in refs.cells
    # the label is escaped, not markup
    assert "&lt;sampler&amp;1&gt;" in text and "<sampler&1>" not in text


def test_from_saved_files_and_cli(prof: gp.Profiler, tmp_path: Path) -> None:
    snap = prof.snapshot().save(tmp_path / "run.snap")
    js = tmp_path / "run.json"
    prof.summary().to_json(js)
    text = html_report(js, size_px=(400, 300))
    assert isinstance(text, str) and text.count("data:image/png;base64,") == 3
    out = tmp_path / "cli.html"
    r = run_cli("report", str(snap), "--html", str(out), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().startswith("{")  # --json output stays clean; notes go to stderr
    assert "wrote" in r.stderr
    assert out.read_text().count("data:image/png;base64,") == 3


def test_no_windows_and_bad_input(tmp_path: Path) -> None:
    p = gp.Profiler(["env"])
    for _ in range(3):
        p.begin()
        p.lap(0)
    p.end()
    text = html_report(p, size_px=(400, 300))
    assert isinstance(text, str)
    assert "No window closed yet" in text and text.count("data:image/png") == 1
    with pytest.raises(ValueError, match="nothing to export"):
        html_report(gp.Profiler(["env"]))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a valid gyreprof summary"):
        html_report(bad)


def _browser() -> str | None:
    for name in _BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def test_headless_chromium_screenshot(prof: gp.Profiler, tmp_path: Path) -> None:
    browser = _browser()
    if browser is None:
        pytest.skip(
            f"no Chromium binary found (looked for {', '.join(_BROWSERS)}); "
            "install Debian's `chromium` package to run this check"
        )
    page = html_report(prof, tmp_path / "report.html")
    shot = tmp_path / "shot.png"
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1200,900",
        f"file://{Path(page).resolve()}",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 1000
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1200, 900)
    from matplotlib.image import imread

    rgb = (imread(shot)[..., :3].reshape(-1, 3) * 255).astype(np.uint32)
    packed = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
    assert len(np.unique(packed)) > 20, "the screenshot is blank"
    # mostly a white page with dark text on it
    assert float((rgb.sum(axis=1) < 200).mean()) > 0.002


def test_the_page_carries_the_verdict_the_trainer_and_the_wait_ratio(
    prof: gp.Profiler, tmp_path: Path
) -> None:
    """Given a verdict and a trainer, the page words them as the text does (issue 22, 9)."""
    from gyreprof.render import text as render_text

    tp = gp.Profiler(["wait", "compute"])
    for _ in range(60):
        tp.begin()
        tp.record("wait", 300_000)
        tp.record("compute", 100_000)
    tp.end()
    v = gp.diagnose(prof, tp, loop="sync")
    page = str(html_report(prof, verdict=v, trainer=tp))
    esc = __import__("html").escape
    assert esc(render_text.verdict_headline(v), quote=True) in page
    wait_line = render_text.wait_report(v.wait_report).splitlines()[1]
    assert wait_line.startswith("wait ratio: ") and esc(wait_line, quote=True) in page
    for phase, share in v.sampler_shares.items():
        assert f"<td>{esc(phase, quote=True)}</td><td>{render_text.fmt_pct(share)}</td>" in page
    assert "<h2>Trainer" in page and "<td>compute</td>" in page
