"""Start-up banner: the facts about a run that people otherwise ask for after it failed.

``banner(log=None)`` prints, flushed, to stdout and appends to ``log``: time, pid,
argv, cwd, Python and platform, the versions of the packages that matter (numpy,
torch and its CUDA build, gymnasium, gyreprof, ...), ``CUDA_VISIBLE_DEVICES`` and
the thread-count environment variables, CPU count and affinity, memory, and
whether stdout is buffered.  Call it first thing in a training script: if the run
dies at start-up, the log still says what it ran with.

The text is ASCII only (anything else is escaped), so a console or log with a
non-UTF-8 encoding (``LC_ALL=C``, ``PYTHONIOENCODING=ascii``) cannot break it.

Torch: package versions are read from installed metadata, without importing.
Torch's CUDA build is read from ``torch/version.py`` without importing torch.
Devices are queried only if the program has already imported torch (so the
banner never pays torch's import time), and device names only once CUDA is
initialised (so the banner never initialises CUDA before worker processes fork).

``faulthandler=True`` also makes fatal signals (SIGSEGV, SIGFPE, SIGABRT, SIGBUS,
SIGILL) print every thread's Python stack to stderr, and -- where SIGUSR1 has no
handler yet -- makes ``kill -USR1 <pid>`` print them without stopping the process.
"""

from __future__ import annotations

import datetime as _dt
import faulthandler as _faulthandler
import os
import platform
import re
import signal
import socket
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata, util
from pathlib import Path
from typing import IO, Any

from gyreprof._support.format import fmt_bytes
from gyreprof._support.validate import check_output_path
from gyreprof._version import __version__

#: Distributions whose versions the banner lists (when installed).
PACKAGES: tuple[str, ...] = (
    "gyreprof",
    "numpy",
    "torch",
    "gymnasium",
    "gym",
    "jax",
    "ray",
    "psutil",
    "cython",
)

#: Environment variables the banner lists ("(unset)" when absent).
ENV_VARS: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "RAYON_NUM_THREADS",
    "PYTHONUNBUFFERED",
)

# Keeps the log file that faulthandler writes to open for the life of the process.
_FAULT_FILES: list[IO[Any]] = []


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _torch_cuda_build() -> str | None:
    """torch's CUDA build ('12.1'), 'cpu' for a CPU build, None if unknown; no torch import."""
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        return str(cuda) if cuda else "cpu"
    try:
        spec = util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "version.py"
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
        if match:
            value = match.group(1).strip().strip("'\"")
            return "cpu" if value in ("None", "") else value
    return None


def _torch_devices() -> str | None:
    """Devices as torch sees them, only if torch is already imported (never initialises CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        return None
    try:
        if not cuda.is_available():
            return "CUDA not available"
        count = int(cuda.device_count())
        if cuda.is_initialized():
            names = [str(cuda.get_device_name(i)) for i in range(count)]
            return f"{count} CUDA device(s): " + "; ".join(names)
        return f"{count} CUDA device(s) (names shown once CUDA is initialised)"
    except Exception as exc:  # a broken driver is exactly what the banner should show
        return f"CUDA query failed: {type(exc).__name__}: {exc}"


def _ranges(cpus: Iterable[int]) -> str:
    ids = sorted(cpus)
    if not ids:
        return "none"
    parts: list[str] = []
    start = prev = ids[0]
    for c in ids[1:]:
        if c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = c
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


def _stream_kind(stream: Any) -> str:
    if stream is None:
        return "none"
    try:
        if stream.isatty():
            return "a terminal (line-buffered)"
    except (AttributeError, ValueError, OSError):
        return "not a file"
    if getattr(stream, "write_through", False) or getattr(stream, "line_buffering", False):
        return "a file or pipe, unbuffered"
    return (
        "a file or pipe, block-buffered (output can be lost on a crash: "
        "python -u or PYTHONUNBUFFERED=1)"
    )


def _enable_faulthandler(log_fh: IO[Any] | None) -> tuple[str, bool]:
    """Enable faulthandler on stderr (or the log if stderr has no descriptor).

    Returns the banner text and whether the log file is now faulthandler's target.
    """
    target: IO[Any] | None = None
    try:
        sys.stderr.fileno()
        target = sys.stderr
    except (AttributeError, ValueError, OSError):
        target = log_fh
    if target is None:
        return "not enabled (stderr has no file descriptor and no log was given)", False
    try:
        _faulthandler.enable(file=target, all_threads=True)
    except (ValueError, OSError, RuntimeError) as exc:
        return f"not enabled ({exc})", False
    where = "stderr" if target is sys.stderr else "the log"
    text = f"on (fatal signals -> {where})"
    usr1 = getattr(signal, "SIGUSR1", None)
    register = getattr(_faulthandler, "register", None)
    if usr1 is not None and register is not None:
        try:
            current = signal.getsignal(usr1)
        except (ValueError, OSError):
            current = None
        if current in (signal.SIG_DFL, None):
            try:
                register(usr1, file=target, all_threads=True, chain=False)
                text += f"; kill -USR1 {os.getpid()} prints every thread's stack"
            except (ValueError, OSError, RuntimeError):
                pass
    return text, target is log_fh


def _run_rows() -> list[tuple[str, str]]:
    """Which program ran, when, where and with what interpreter."""
    now = _dt.datetime.now(_dt.timezone.utc).astimezone()
    return [
        ("time", now.isoformat(timespec="seconds")),
        ("host", socket.gethostname()),
        ("pid", f"{os.getpid()} (parent {os.getppid()})"),
        ("argv", " ".join(sys.argv) if sys.argv else "(none)"),
        ("cwd", os.getcwd()),
        (
            "python",
            f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        ),
        ("platform", platform.platform()),
    ]


def _package_rows(packages: Iterable[str]) -> list[tuple[str, str]]:
    """Installed versions (torch with its CUDA build and devices); absent packages left out."""
    rows: list[tuple[str, str]] = []
    for dist in packages:
        version = __version__ if dist == "gyreprof" else _version(dist)
        if version is None:
            continue
        text = version
        if dist == "torch":
            cuda = _torch_cuda_build()
            if cuda is not None:
                text += f" (CUDA build: {cuda})"
            devices = _torch_devices()
            text += f"; {devices}" if devices else "; devices not queried (torch not imported yet)"
        rows.append((dist, text))
    return rows


def _machine_rows(out: Any) -> list[tuple[str, str]]:
    """Environment variables, CPUs and affinity, memory, and how stdout buffers."""
    rows = [(var, os.environ.get(var, "(unset)")) for var in ENV_VARS]
    cpus = os.cpu_count()
    affinity: str
    try:
        allowed = os.sched_getaffinity(0)
        affinity = f"{len(allowed)} usable: {_ranges(allowed)}"
    except (AttributeError, OSError):
        affinity = "unknown on this platform"
    rows.append(("cpus", f"{cpus} logical; affinity {affinity}"))
    try:
        import psutil

        vm = psutil.virtual_memory()
        rss = psutil.Process().memory_info().rss
        rows.append(
            (
                "memory",
                f"{fmt_bytes(vm.total)} total, {fmt_bytes(vm.available)} available; "
                f"rss {fmt_bytes(rss)}",
            )
        )
    except (ImportError, OSError) as exc:
        rows.append(("memory", f"unknown ({exc})"))
    rows.append(("stdout", _stream_kind(out)))
    return rows


def _render(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    rule = "=" * 72
    lines = [rule, "gyreprof start-up banner", rule]
    lines += [f"{k.ljust(width)} : {v}" for k, v in rows]
    lines.append(rule)
    return _ascii("\n".join(lines) + "\n")


def _write(text: str, out: IO[str] | None, log_fh: IO[Any] | None) -> None:
    if out is not None:
        try:
            out.write(text)
            out.flush()
        except (OSError, ValueError):
            pass  # a closed stdout must not stop the run the banner introduces
    if log_fh is not None:
        log_fh.write(text)
        log_fh.flush()


def banner(
    log: str | os.PathLike[str] | None = None,
    *,
    extra: Mapping[str, object] | None = None,
    faulthandler: bool = False,
    packages: Iterable[str] = PACKAGES,
    stream: IO[str] | None = None,
) -> str:
    """Print the start-up banner, flushed, to ``stream`` (default stdout) and append it to
    ``log``; return the text.

    ``extra``: more ``key: value`` lines for the run's own settings (a server URL, a
    timeout, a retry limit).  ``faulthandler``: install faulthandler for fatal signals
    (and SIGUSR1 where free).  ``packages``: distribution names whose versions to list.

    Raises ``ValueError`` if ``log`` is a directory or its folder does not exist.
    """
    log_path = None if log is None else check_output_path("log", log)
    out = stream if stream is not None else sys.stdout
    rows = _run_rows() + _package_rows(packages) + _machine_rows(out)
    rows += [(str(key), str(value)) for key, value in (extra or {}).items()]

    log_fh: IO[Any] | None = None
    if log_path is not None:
        log_fh = open(log_path, "a", encoding="ascii", errors="backslashreplace")
    keep_log_open = False
    try:
        if faulthandler:
            fault_text, keep_log_open = _enable_faulthandler(log_fh)
            rows.append(("faulthandler", fault_text))
        text = _render(rows)
        _write(text, out, log_fh)
    finally:
        if log_fh is not None:
            if keep_log_open:
                _FAULT_FILES.append(log_fh)  # faulthandler writes here on a fatal signal
            else:
                log_fh.close()
    return text
