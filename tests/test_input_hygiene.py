"""Input hygiene: names shown safely in terminals, plots and HTML; constructor arguments
checked by type and range; optional extras checked before any output."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof._support.format import plot_text, safe_name, safe_text
from gyreprof.cli import main as cli_main

EVIL = "env\x1b[2J\x07"  # clears the screen and rings the bell when printed raw
MATH = "cost $x$"
BAD_MATH = r"bad $\frac{$"  # mathtext cannot parse it: a raw label fails at draw time
HTMLISH = "<script>alert(1)</script>"
PHASES = [EVIL, MATH, BAD_MATH, HTMLISH]
CONTROL = [chr(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def _profiler(**kwargs: object) -> gp.Profiler:
    prof = gp.Profiler(PHASES, window_steps=50, label="run \x1b]0;pwned\x07 $y$", **kwargs)  # type: ignore[arg-type]
    ids = list(range(len(PHASES)))
    for _ in range(400):
        prof.begin()
        for i in ids:
            prof.lap(i)
    prof.end()
    prof.count("steps\x1b[31m")
    return prof


def _no_controls(text: str) -> None:
    bad = sorted({repr(c) for c in text if c in CONTROL and c != "\n"})
    assert not bad, f"raw control characters reached the output: {bad}"


@pytest.fixture(scope="module")
def saved() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-hygiene-"))
    path = d / "run.snap"
    _profiler().snapshot().save(path)
    yield path
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


# ------------------------------------------------------------------ safe_name


def test_safe_name_escapes_controls_and_keeps_unicode() -> None:
    assert safe_name(EVIL) == "env\\x1b[2J\\x07"
    assert safe_name("a\tb\nc\rd") == "a\\tb\\nc\\rd"
    assert safe_name("\x9b31m") == "\\x9b31m"  # C1 CSI: an escape sequence on its own
    assert safe_name("\u202eevil") == "\\u202eevil"  # right-to-left override
    assert safe_name("caf\u00e9 \u4e2d \U0001f642") == "caf\u00e9 \u4e2d \U0001f642"
    assert safe_name("a\\b and spaces") == "a\\b and spaces"
    for c in CONTROL:
        _no_controls(safe_name(f"x{c}y"))
    assert safe_text("one\x1b\ntwo") == "one\\x1b\ntwo"  # line breaks kept
    assert plot_text(MATH) == r"cost \$x\$"


# ------------------------------------------------------------------ terminal


@pytest.mark.parametrize("fmt", [[], ["--markdown"]])
def test_report_prints_names_safely(saved: Path, fmt: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gyreprof", "report", str(saved), *fmt],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    _no_controls(out.stdout)
    assert "env\\x1b[2J\\x07" in out.stdout
    assert MATH in out.stdout  # '$' is fine in a terminal
    if not fmt:
        assert "steps\\x1b[31m" in out.stdout  # the counter's name too


def test_summary_renderers_escape_names() -> None:
    s = _profiler().summary()
    for text in (str(s), s.to_markdown(), s.table()):
        _no_controls(text)
        assert "env\\x1b[2J\\x07" in text
    # the data keep the real names: only what is shown is escaped
    assert EVIL in s.phases and s.to_dict()["counters"] == {"steps\x1b[31m": 1}


def test_top_once_prints_names_safely(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-live-"))
    monkeypatch.setenv("GYREPROF_LIVE_DIR", str(d))
    prof = _profiler(live=True)
    try:
        capsys.readouterr()
        rc = cli_main(["top", str(os.getpid()), "--once", "--interval", "0"])
        out, _ = capsys.readouterr()
        assert rc == 0
        _no_controls(out)
        assert "env\\x1b[2J\\x07" in out and "steps\\x1b[31m" in out
        assert "]0;pwned" not in out or "\\x1b]0;pwned" in out
    finally:
        prof.live.close()
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def test_top_rich_view_does_not_read_names_as_markup() -> None:
    pytest.importorskip("rich")
    from rich.console import Console

    from gyreprof.live._top import Frame, render_rich

    assert Frame is not None
    d = Path(tempfile.mkdtemp(prefix="gyreprof-live-"))
    old = os.environ.get("GYREPROF_LIVE_DIR")
    os.environ["GYREPROF_LIVE_DIR"] = str(d)
    prof = gp.Profiler(["[bold red]x[/]", EVIL], live=True)
    try:
        for _ in range(10):
            prof.begin()
            prof.lap(0)
            prof.lap(1)
        from gyreprof.live._top import TopModel

        model = TopModel(os.getpid())
        frame = model.refresh()
        console = Console(record=True, width=200, force_terminal=False)
        console.print(render_rich(frame))
        text = console.export_text()
        model.close()
        assert "[bold red]x[/]" in text  # shown literally, not styled away
        assert "env\\x1b[2J\\x07" in text
        _no_controls(text)
    finally:
        prof.live.close()
        if old is None:
            os.environ.pop("GYREPROF_LIVE_DIR", None)
        else:
            os.environ["GYREPROF_LIVE_DIR"] = old
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


# ------------------------------------------------------------------ plots and HTML


def test_plots_render_names_literally(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from gyreprof.export import plots

    prof = _profiler()
    fig = plots.plot_percentiles(prof)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith(r"cost \$x\$  (p99") for t in texts)
    assert any(t.startswith(r"bad \$\frac{\$") for t in texts)
    assert any(t.startswith("env\\x1b[2J\\x07") for t in texts)
    assert plots.figure_png(fig).startswith(b"\x89PNG")  # draws: no mathtext error
    fig = plots.plot_windows(prof)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert r"cost \$x\$ p50" in texts and r"cost \$x\$ p99" in texts
    assert plots.figure_png(fig).startswith(b"\x89PNG")
    fig = plots.plot_shares(prof)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert r"cost \$x\$" in texts
    assert plots.figure_png(fig).startswith(b"\x89PNG")
    fig = plots.plot_report(prof, tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")
    assert fig._suptitle.get_text() == r"gyreprof report: run \x1b]0;pwned\x07 \$y\$"


def test_a_raw_dollar_label_would_break_the_plot() -> None:
    """The reason for escaping: matplotlib parses '$...$' as mathtext and fails at draw."""
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], label=BAD_MATH)
    ax.legend()
    with pytest.raises(ValueError):
        fig.canvas.draw()


def test_sweep_plot_draws_names_with_dollars(tmp_path: Path) -> None:
    """A parameter or fixed keyword whose name mathtext cannot parse still plots."""
    pytest.importorskip("matplotlib")
    from gyreprof.analysis.sweep import SweepPoint, SweepResult, SweepRun

    def point(value: int, rate: float) -> SweepPoint:
        runs = [
            SweepRun(value=value, repeat=i, status="ok", samples_per_s=rate, peak_rss_bytes=1 << 20)
            for i in range(2)
        ]
        return SweepPoint.from_runs(value, runs)

    result = SweepResult(
        param=BAD_MATH,
        values=(1, 2),
        fixed={BAD_MATH + "2": "$\\x$", EVIL: 1},
        points=(point(1, 100.0), point(2, 200.0)),
        stop_reason="end",
        stop_detail="",
        stopped_at=None,
        flat_from=None,
        recommended=2,
        skipped=(),
        warnings=(),
        factory="f",
        settings={},
    )
    png = result.to_plot(tmp_path / "s.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_report_escapes_names() -> None:
    pytest.importorskip("matplotlib")
    from gyreprof.export import html_report

    page = html_report(_profiler())
    assert isinstance(page, str)
    assert HTMLISH not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    _no_controls(page)
    assert "env\\x1b[2J\\x07" in page


# ------------------------------------------------------------------ constructor


@pytest.mark.parametrize(
    ("kwargs", "exc", "pattern"),
    [
        ({"label": b"x"}, TypeError, r"^label must be a str or None, got bytes .*decode"),
        ({"label": 3}, TypeError, r"^label must be a str"),
        ({"label": "\ud800"}, ValueError, r"^label must be text that UTF-8 can encode"),
        ({"capacity": True}, TypeError, r"^capacity must be an int, got bool"),
        ({"capacity": 1.5}, TypeError, r"^capacity must be an int, got float"),
        ({"capacity": 0}, ValueError, r"^capacity must be >= 1"),
        ({"capacity": 2**70}, ValueError, r"^capacity must be <= "),
        ({"warmup_steps": True}, TypeError, r"^warmup_steps must be an int"),
        ({"warmup_steps": 2**64}, ValueError, r"^warmup_steps must be <= "),
        ({"warmup_steps": -1}, ValueError, r"^warmup_steps must be >= 0"),
        ({"warmup_s": "1"}, TypeError, r"^warmup_s must be a number of seconds"),
        ({"warmup_s": True}, TypeError, r"^warmup_s must be a number"),
        ({"warmup_s": 1e300}, ValueError, r"^warmup_s must be <= "),
        ({"warmup_s": float("nan")}, ValueError, r"^warmup_s must be a finite number"),
        ({"window_steps": 2**64}, ValueError, r"^window_steps must be <= "),
        ({"window_steps": False}, TypeError, r"^window_steps must be an int"),
        ({"max_windows": 0}, ValueError, r"^max_windows must be >= 1"),
        ({"max_windows": 2**40}, ValueError, r"^max_windows must be <= "),
        ({"max_counters": 2**40}, ValueError, r"^max_counters must be <= "),
        ({"significant_figures": 6}, ValueError, r"^significant_figures must be <= 5"),
        ({"significant_figures": 3.0}, TypeError, r"^significant_figures must be an int"),
        ({"lowest_ns": 2**63}, ValueError, r"^lowest_ns must be <= "),
        ({"highest_ns": 2**70}, ValueError, r"^highest_ns must be <= "),
        ({"highest_ns": 1}, ValueError, r"^highest_ns must be at least 2 \* lowest_ns"),
        ({"clock": 1}, TypeError, r"^clock must be 'monotonic', 'tsc' or 'auto'"),
        ({"per_thread": "yes"}, TypeError, r"^per_thread must be True or False"),
        ({"live": 1}, TypeError, r"^live must be True, False or a segment name"),
    ],
)
def test_profiler_arguments_are_checked(
    kwargs: dict[str, object], exc: type[Exception], pattern: str
) -> None:
    with pytest.raises(exc, match=pattern):
        gp.Profiler(["env"], **kwargs)  # type: ignore[arg-type]


def test_no_overflow_error_escapes_the_constructor() -> None:
    names = ["capacity", "warmup_steps", "window_steps", "max_windows", "max_counters"]
    names += ["lowest_ns", "highest_ns", "significant_figures"]
    for name in names:
        for big in (2**63, 2**64, -(2**64)):
            with pytest.raises(ValueError, match=f"^{name} must be"):
                gp.Profiler(["env"], **{name: big})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("phases", "exc", "pattern"),
    [
        ([b"env"], TypeError, r"^phases\[0\] must be a str, got bytes"),
        (["env", 3], TypeError, r"^phases\[1\] must be a str, got int"),
        (["env", " "], ValueError, r"^phases\[1\] must be a non-empty name"),
        (["\udcff"], ValueError, r"^phases\[0\] must be text that UTF-8 can encode"),
        ("env", TypeError, r"not one string"),
        (5, TypeError, r"^phases must be a list of names"),
    ],
)
def test_phase_names_are_checked(phases: object, exc: type[Exception], pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        gp.Profiler(phases)  # type: ignore[arg-type]


def test_numpy_ints_and_str_labels_still_pass(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    prof = gp.Profiler(["env"], capacity=np.int64(1024), warmup_steps=np.int32(0), label="ok")
    prof.begin()
    prof.lap(0)
    prof.end()
    prof.snapshot().save(tmp_path / "x.snap")  # the label saves: the point of the check
    assert gp.Snapshot.load(tmp_path / "x.snap").summary().meta.get("label") == "ok"


# ------------------------------------------------------------------ optional extras

BLOCKER = textwrap.dedent(
    """
    import os, sys
    _blocked = set(filter(None, os.environ.get("GYREPROF_TEST_BLOCK", "").split(",")))

    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in _blocked:
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, _Blocker())
    """
)


@pytest.fixture(scope="module")
def blocker_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gyreprof-block-"))
    (d / "sitecustomize.py").write_text(BLOCKER)
    yield d
    (d / "sitecustomize.py").unlink()
    d.rmdir()


def _without(
    blocker_dir: Path, module: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(blocker_dir), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(PYTHONPATH=path, GYREPROF_TEST_BLOCK=module),
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("module", "args", "hint"),
    [
        ("matplotlib", ["report", "{saved}", "--plot", "{tmp}/out.png"], "gyreprof[plot]"),
        ("matplotlib", ["report", "{saved}", "--html", "{tmp}/out.html"], "gyreprof[plot]"),
        ("rich", ["top"], "gyreprof[rich]"),
        ("gymnasium", ["demo", "--steps", "10"], "gyreprof[gym]"),
        (
            "matplotlib",
            ["sweep", "no_such_mod:make", "--param", "batch_size", "--values", "1,2"]
            + ["--plot", "{tmp}/s.png"],
            "gyreprof[plot]",
        ),
    ],
)
def test_missing_extra_stops_before_any_output(
    blocker_dir: Path, saved: Path, tmp_path: Path, module: str, args: list[str], hint: str
) -> None:
    argv = [a.format(saved=saved, tmp=tmp_path) for a in args]
    out = _without(blocker_dir, module, *argv)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""  # nothing printed before the check
    assert f"pip install '{hint}'" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # and nothing written


def test_the_blocker_blocks_only_what_it_names(blocker_dir: Path, saved: Path) -> None:
    """Control: with another module blocked the same command works, so the failure above
    comes from the missing extra."""
    out = _without(blocker_dir, "no_such_module_here", "report", str(saved))
    assert out.returncode == 0, out.stderr
    assert "env\\x1b[2J\\x07" in out.stdout


# ------------------------------------------------------------------ overflow at Python entry points


def test_no_overflow_error_from_python_entry_points() -> None:
    prof = gp.Profiler(["a"], window_steps=10)
    for _ in range(30):
        prof.begin()
        prof.lap(0)
    prof.end()
    with pytest.raises(ValueError, match=r"^steps must be at most "):
        prof.windows(steps=2**70)
    with pytest.raises(ValueError, match=r"^seconds must be at most "):
        prof.windows(seconds=1e300)
    assert prof.windows(steps=10)  # ordinary values still work
    with pytest.raises(ValueError, match=r"^interval_s must be at most 86400 seconds"):
        gp.census(os.getpid(), interval_s=1e300)
    with pytest.raises(ValueError, match=r"^sample_s must be at most 86400 seconds"):
        gp.check_parallelism(os.getpid(), sample_s=1e300)
