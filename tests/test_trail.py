"""The start-up trail's exception tracing, on real subprocesses, with this Python's one
tracer: the C trace function (``gyreprof._core.trace``) on 3.10-3.11, ``sys.monitoring``
on 3.12+.

- a swallowed exception is reported with the file:line that raised it and the one that
  caught it, also when it was raised in the standard library, and when the same
  exception object's address comes back for the next exception;
- the bounds: at most MAX_EXCEPTIONS exceptions (then one ``exc-cap``), at most
  MAX_UP_LINES frames followed for each;
- a thread started during start-up is traced and named; after the first record no
  thread records anything;
- a library's submodule imported during start-up runs untraced (what it swallows is not
  seen), and tracing comes back for the user's code after it;
- tracing ends at the start-up time limit in a process that never records;
- the C tracer loads without ``gyreprof._core``'s ``__init__`` (no numpy before the
  user's code), and starting the trail loads no module but it, ``_json`` and
  ``faulthandler`` (no json, pathlib, sysconfig, typing, threading, importlib);
- a line written without json reads back as json writes it; the standard library's
  folders worked out without sysconfig include sysconfig's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gyreprof.integrations._auto import trail
from gyreprof.model import trail_file

NATIVE = trail._native is not None
MONITORING = sys.version_info >= (3, 12)
# one tracer per Python version (the parameter names it in the test ids)
TRACERS = ["monitoring"] if MONITORING else ["c"]

MAIN = """
import sys
from pathlib import Path

from gyreprof.integrations._auto import trail

assert sys.argv[2] == ("monitoring" if trail._native is None else "c")
{before}
trail.start(Path(sys.argv[1]))
import user  # noqa: E402,F401
"""


def _run(
    tmp: Path, tracer: str, user: str, before: str = "", files: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Run ``user.py`` (imported after the trail started) in a fresh interpreter; the
    trail's JSON lines."""
    (tmp / "main.py").write_text(MAIN.format(before=before))
    (tmp / "user.py").write_text(textwrap.dedent(user))
    for name, text in (files or {}).items():
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    run_dir = tmp / "run"
    run_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, str(tmp / "main.py"), str(run_dir), tracer],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = run_dir.glob("*.trail")
    return [json.loads(t) for t in path.read_text().splitlines() if t.startswith("{")]


def _excs(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in lines if e["ev"] == "exc"]


def _info(tmp: Path, lines: list[dict[str, Any]]) -> trail_file.TrailInfo:
    path = tmp / "copy.trail"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    info = trail_file.read_trail(path)
    assert info is not None
    return info


SWALLOW = """
import os


def home():
    return os.environ["GYRE_TEST_UNSET_VAR"]


def middle():
    return home()


def load():
    try:
        return middle()
    except KeyError:
        return None


load()
d = {}
for i in range(5):
    try:
        d[i]
    except KeyError:
        pass
"""


@pytest.mark.parametrize("tracer", TRACERS)
def test_swallowed_exception_names_where_raised_and_caught(tmp_path: Path, tracer: str) -> None:
    """Raised in os.environ (the standard library: named at the first frame of the user's
    it reaches, user.py:6), followed through middle() into load(), caught there (user.py:15).
    Then five KeyErrors in a row at one line, each freed before the next: often at the same
    address, which identity alone takes for one exception moving up."""
    lines = _run(tmp_path, tracer, SWALLOW)
    excs = _excs(lines)
    user = str(tmp_path / "user.py")
    first = excs[0]
    assert first["repr"] == "KeyError('GYRE_TEST_UNSET_VAR')"
    assert first["at"] == f"{user}:6" and first["func"] == "home"
    assert first["main"] is True and first["thread"] == "MainThread"
    info = _info(tmp_path, lines)
    e = info.exceptions[first["id"]]
    assert e["caught"] == f"{user}:15" and e["caught_func"] == "load"
    ups = [u["at"] for u in lines if u["ev"] == "exc-up" and u["id"] == first["id"]]
    assert ups[:2] == [f"{user}:10", f"{user}:15"]
    assert len(ups) == 2 or MONITORING  # 3.12+: and EXCEPTION_HANDLED's line
    loop = [x for x in excs if x["at"] == f"{user}:24"]
    assert [x["msg"] for x in loop] == ["0", "1", "2", "3", "4"], excs
    words = " ".join(trail_file.describe(info, alive=True))
    assert "KeyError('GYRE_TEST_UNSET_VAR') raised at" in words and "user.py:6" in words
    assert "caught at" in words and "user.py:15" in words


IMPORTED = """
try:
    import mod_a
except KeyError:
    pass
"""
IMPORTED_FILES = {
    "mod_a.py": "import mod_b\n",
    "mod_b.py": "def get():\n    return {}['in mod_b']\n\n\nVALUE = get()\n",
}


@pytest.mark.parametrize("tracer", TRACERS)
def test_an_exception_out_of_an_import_is_followed_to_its_catcher(
    tmp_path: Path, tracer: str
) -> None:
    """Raised in mod_b, through mod_a's import, caught by user.py's ``try: import``: the
    import machinery's frames in between (and those it cuts from the traceback) do not
    make it a new exception."""
    lines = _run(tmp_path, tracer, IMPORTED, files=IMPORTED_FILES)
    excs = [e for e in _excs(lines) if e["msg"] == "'in mod_b'"]
    assert len(excs) == 1, _excs(lines)
    assert excs[0]["at"] == f"{tmp_path / 'mod_b.py'}:2"
    e = _info(tmp_path, lines).exceptions[excs[0]["id"]]
    assert e["caught"] == f"{tmp_path / 'user.py'}:3", e


BOUNDS = """
def deep(n):
    if n == 0:
        raise ValueError("deep")
    return deep(n - 1)


try:
    deep(30)
except ValueError:
    pass
for i in range(100):
    try:
        raise LookupError(f"n{i}")
    except LookupError:
        pass
"""


@pytest.mark.parametrize("tracer", TRACERS)
def test_exceptions_and_frames_followed_are_bounded(tmp_path: Path, tracer: str) -> None:
    lines = _run(tmp_path, tracer, BOUNDS)
    excs = _excs(lines)
    assert len(excs) == trail.MAX_EXCEPTIONS
    assert [e["ev"] for e in lines].count("exc-cap") == 1
    assert excs[0]["msg"] == "deep"
    ups = [u for u in lines if u["ev"] == "exc-up" and u["id"] == excs[0]["id"]]
    # 30 frames deep, followed through 12 (3.12+: and the EXCEPTION_HANDLED line)
    assert len(ups) == trail.MAX_UP_LINES + MONITORING
    assert [e["msg"] for e in excs[1:]] == [f"n{i}" for i in range(trail.MAX_EXCEPTIONS - 1)]
    assert [e["id"] for e in excs] == list(range(1, trail.MAX_EXCEPTIONS + 1))


THREADS = """
import sys
import threading

from gyreprof.integrations._auto import trail

seen = threading.Event()
go_on = threading.Event()


def worker():
    try:
        {}["in-thread"]
    except KeyError:
        pass
    seen.set()
    go_on.wait(60)
    for i in range(50):  # after the first record: none of these is recorded
        try:
            raise OSError(i)
        except OSError:
            pass
    # and the thread no longer runs a trace function (it dropped it at its next call)
    native = trail._native
    tracing = native.active() if native is not None else sys.gettrace() is not None
    with open("worker-tracing.txt", "w") as f:
        f.write(str(tracing))


t = threading.Thread(target=worker, name="worker-1")
t.start()
assert seen.wait(60)
trail.first_record()
go_on.set()
t.join(60)
try:
    raise ValueError("after the record, main thread")
except ValueError:
    pass
"""


@pytest.mark.parametrize("tracer", TRACERS)
@pytest.mark.parametrize(
    "before",
    # threading loaded before the trail starts (settrace at once), or first by the user
    # (the trail does not import it: settrace when it is imported)
    ["import threading", "assert 'threading' not in sys.modules"],
    ids=["threading-before", "threading-after"],
)
def test_a_thread_started_in_start_up_is_traced_until_the_first_record(
    tmp_path: Path, tracer: str, before: str
) -> None:
    lines = _run(tmp_path, tracer, THREADS, before=before)
    excs = _excs(lines)
    assert [(e["msg"], e["thread"], e["main"]) for e in excs] == [
        ("'in-thread'", "worker-1", False)
    ], excs
    events = [e["ev"] for e in lines]
    assert "first-record" in events
    assert not any(e.startswith("exc") for e in events[events.index("first-record") :])
    assert (tmp_path / "worker-tracing.txt").read_text() == "False"


LIBRARY = """
import fakelib
import fakelib.sub

try:
    raise RuntimeError("user code after the library import")
except RuntimeError:
    pass
"""
FAKELIB = {
    "site/lib/python3/site-packages/fakelib/__init__.py": "",
    "site/lib/python3/site-packages/fakelib/sub.py": """
        try:
            raise ValueError("swallowed inside the library's import")
        except ValueError:
            pass
    """,
}


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_library_submodule_import_is_not_traced(tmp_path: Path, tracer: str) -> None:
    """A library's submodule (a site-packages path) imported from the user's code runs
    untraced, as its top-level package does; tracing is back for the user's next line."""
    site = tmp_path / "site/lib/python3/site-packages"
    lines = _run(
        tmp_path, tracer, LIBRARY, before=f"sys.path.insert(0, {str(site)!r})", files=FAKELIB
    )
    msgs = [e["msg"] for e in _excs(lines)]
    if MONITORING:  # sys.monitoring costs nothing where nothing raises: no pause there
        assert msgs == ["swallowed inside the library's import", msgs[-1]], msgs
    assert msgs[-1:] == ["user code after the library import"], msgs
    assert len(msgs) == 1 + MONITORING, msgs
    assert any(e["ev"] == "imported" and e["name"] == "fakelib" for e in lines)
    assert not any(e.get("name") == "fakelib.sub" for e in lines)  # submodules not timed


SPIN = """
import time

from gyreprof.integrations._auto import trail


def f():
    return 1


end = time.monotonic() + 60
while time.monotonic() < end and (trail._trail is None or trail._trail.on):
    f()
    try:  # 3.12+ checks the limit where something raises
        raise ValueError("spin")
    except ValueError:
        pass
try:
    raise ValueError("after the limit")
except ValueError:
    pass
"""


@pytest.mark.parametrize("tracer", TRACERS)
def test_tracing_ends_at_the_time_limit_without_a_record(tmp_path: Path, tracer: str) -> None:
    lines = _run(
        tmp_path, tracer, SPIN, before="trail._trace_limit_s = lambda: 0.3  # type: ignore"
    )
    events = [e["ev"] for e in lines]
    off = [e for e in lines if e["ev"] == "trace-off"]
    assert len(off) == 1 and "timeout" in off[0]["why"], lines
    assert not any(e.startswith("exc") for e in events[events.index("trace-off") :])
    assert "first-record" not in events


RESTORE = """
import sys

old = sys.gettrace()
sys.settrace(None)
sys.settrace(old)


def f():
    try:
        raise KeyError("after a restore")
    except KeyError:
        pass


f()
"""


@pytest.mark.skipif(not NATIVE, reason="the C tracer")
def test_the_c_tracer_comes_back_through_settrace_of_gettrace(tmp_path: Path) -> None:
    """A tool that saves ``sys.gettrace()`` and sets it back (coverage, a debugger) gets
    the C tracer back, not a Python function standing where it was."""
    lines = _run(tmp_path, "c", RESTORE)
    assert [e["msg"] for e in _excs(lines)] == ["'after a restore'"]


def test_the_c_tracer_loads_without_the_core_package() -> None:
    assert NATIVE == (sys.version_info < (3, 12))  # one tracer per version, no fallback
    code = (
        "import sys\n"
        "from gyreprof.integrations._auto import trail\n"
        "print(trail._native is not None, 'numpy' in sys.modules,"
        " 'gyreprof._core' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded, numpy, core = out.stdout.split()
    assert numpy == "False" and core == "False", out.stdout
    assert loaded == str(NATIVE and sys.version_info < (3, 12))


@pytest.mark.skipif(not NATIVE, reason="the C tracer: Python 3.10-3.11")
def test_a_missing_c_tracer_is_an_import_error_saying_how_to_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # no Python tracer stands in: a core built without the trace function is an error
    monkeypatch.delitem(sys.modules, "gyreprof._core.trace")
    monkeypatch.setattr(trail, "_GYREPROF", str(tmp_path) + "/")
    with pytest.raises(ImportError, match=r"start-up tracer .*pip install"):
        trail._load_native()


LIGHT = """
import sys
before = set(sys.modules)
from gyreprof.integrations._auto import trail
trail.start(sys.argv[1])
import _thread
added = sorted(set(sys.modules) - before)
print(" ".join(added))
"""


def test_starting_the_trail_loads_almost_nothing(tmp_path: Path) -> None:
    """What runs before the user's code loads no module a bare interpreter lacks but the
    trail's own, its C tracer, ``_json`` and ``faulthandler``."""
    out = subprocess.run(
        [sys.executable, "-c", LIGHT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    allowed = {"_json", "faulthandler", "__future__", "_cython_3_3_1", "cython_runtime"}
    allowed |= {"gyreprof._core.trace"} if NATIVE else set()
    extra = [m for m in out if not m.startswith("gyreprof") or m == "gyreprof._core"]
    extra = [m for m in extra if m not in allowed and not m.startswith("_cython_")]
    assert not extra, extra
    assert "gyreprof.integrations._auto.trail" in out
    assert not {"json", "pathlib", "sysconfig", "typing", "threading", "importlib"} & set(out)
    (path,) = tmp_path.glob("*.trail")
    (launch,) = [json.loads(t) for t in path.read_text().splitlines()]
    assert launch["ev"] == "launch" and launch["pid"] > 0
    assert launch["main_thread"] > 0 and launch["argv"] == ["-c", str(tmp_path)]


class _Odd:
    def __repr__(self) -> str:
        return "<odd \u00e9>"


@pytest.mark.parametrize(
    "value",
    [
        {"ev": "launch", "t": 0.0123, "pid": 12, "argv": ["a", "é", 'q"\\\n\t'], "x": None},
        {"ok": True, "no": False, "big": 10**30, "neg": -3, "f": -1.5e-7, "tup": (1, "2")},
        {"nan": float("nan"), "inf": float("inf"), "ninf": -float("inf"), "e": {}, "l": []},
        {"env": {"CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "\u2603"}, "o": _Odd()},
        {1: "int key", 2.5: "float key", None: "none", False: "bool", "nest": [[{"a": [1]}]]},
        "plain \x00 text \U0001f600",
    ],
)
def test_a_line_is_written_as_json_writes_it(value: Any) -> None:
    assert trail._dumps(value) == json.dumps(value, default=repr, ensure_ascii=True)


def test_the_standard_library_folders_include_sysconfigs() -> None:
    import os
    import sysconfig

    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths()[key]
        assert os.path.realpath(p) + os.sep in trail._STDLIB
        assert p + os.sep in trail._STDLIB
    assert trail._is_stdlib(json.__file__)
    assert not trail._is_stdlib(pytest.__file__)  # site-packages
