"""``gyreprof run [--json FILE] [--html FILE] [--save DIR] -- COMMAND [ARGS...]``.

Runs COMMAND with every Python process of it instrumented (a ``sitecustomize``
first on ``PYTHONPATH`` starts ``gyreprof.integrations._auto`` in each one:
the main process and the workers started by fork, forkserver or spawn).
gymnasium, stable-baselines3 and TorchRL are recognised where importable. At
the end one report goes to stderr (COMMAND's stdout stays its own): sampler
phases merged over the processes, the trainer's wait ratio, the verdict and
which processes contributed. COMMAND's exit code passes through (128+N when a
signal N ended it); 127 when it is not found.

The settings the report's advice names are options here: ``--warmup-steps N`` /
``--warmup-s S`` (the automatic profilers' warm-up, passed to every process through
the environment, see ``integrations/_auto/options.py``) and ``--loop sync|overlapped``
(the loop's shape, when it cannot be told from the timestamps); ``--stacks-hz N`` /
``--no-stacks`` (the stack sampler that names the code behind untimed time,
``integrations/_auto/stacks.py``). A ``gp.Profiler``
the script creates itself joins the report (``integrations/_auto/user.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gyreprof._support.errors import UsageError

#: what every Python process of the run runs first (its run folder's site/sitecustomize.py):
#: a file of this package, copied with its compiled form (:func:`_put_sitecustomize`)
SITECUSTOMIZE = Path(__file__).with_name("_sitecustomize.py")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="profile an unmodified training script (gymnasium, SB3, TorchRL recognised)",
        description=(
            "Run COMMAND with every Python process of it instrumented: gymnasium env steps, "
            "vector-env send/wait, stable-baselines3 rollouts and updates, TorchRL collectors. "
            "At the end print one report (to stderr): sampler phases merged over all processes, "
            "the trainer's wait ratio, the verdict and which processes contributed. A first "
            "argument ending in .py runs with this Python. The exit code is COMMAND's."
        ),
        usage="gyreprof run [--json FILE] [--html FILE] [--save DIR] [--warmup-steps N | "
        "--warmup-s S] [--loop sync|overlapped] [--server-metrics URL] "
        "[--stacks-hz N | --no-stacks] -- COMMAND [ARGS...]",
        epilog="A gp.Profiler the script creates itself (e.g. gp.Profiler(['wait', 'compute']) "
        "around fetching a batch and the update) joins the report: one with 'wait' and "
        "'compute' phases stands for the trainer when no recognised library ran one.",
    )
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (gyreprof.run/1)")
    p.add_argument("--html", metavar="FILE", help="write the sampler's HTML report (plot extra)")
    p.add_argument(
        "--save",
        metavar="DIR",
        help="keep every process's raw snapshots, the command line and its exit code in DIR "
        "(gyreprof report DIR reports the run again)",
    )
    warm = p.add_mutually_exclusive_group()
    warm.add_argument(
        "--warmup-steps",
        metavar="N",
        type=_warmup_steps,
        help="exclude the trainer's first N steps (one collect-and-update each) from its "
        "steady state, reported apart; the sampler marks no steps and keeps all of its "
        "numbers (use --warmup-s for both)",
    )
    warm.add_argument(
        "--warmup-s",
        metavar="S",
        type=_warmup_seconds,
        help="exclude each automatic profiler's first S seconds (sampler and trainer) from "
        "the steady state, reported apart",
    )
    p.add_argument(
        "--loop",
        choices=("sync", "overlapped"),
        help="the loop's shape for the verdict (sync: collect, then train; overlapped: a "
        "sampler feeding a queue while the trainer computes), when the report says it "
        "could not be told",
    )
    stacks = p.add_mutually_exclusive_group()
    stacks.add_argument(
        "--stacks-hz",
        metavar="N",
        type=_stacks_hz,
        help="the rate of the stack sampler that names the code behind the sampler's "
        "untimed time and the trainer's compute (default 25 per second per process, at most 1000)",
    )
    stacks.add_argument(
        "--no-stacks",
        action="store_true",
        help="run no stack sampler (the report names no code sites)",
    )
    p.add_argument(
        "--server-metrics",
        metavar="URL",
        type=_server_metrics,
        help="the rollout servers' Prometheus metrics pages (comma-separated; one URL stands "
        "for every rollout endpoint), read at the run's start, end and at most once a second "
        "between; default: /metrics on each rollout endpoint's host and port; 'off': none",
    )
    p.add_argument(
        "--startup-timeout",
        metavar="S",
        type=float,
        default=STARTUP_TIMEOUT_S,
        help="when no step or phase is recorded within S seconds, print what each process "
        "is doing (its start-up trail, its state, where its main thread waits); the run goes "
        f"on (default {STARTUP_TIMEOUT_S:g}; 0: never)",
    )
    p.add_argument(
        "--stall-s",
        metavar="S",
        type=float,
        default=60.0,
        help="once started, when no trainer step and no sampler progress is recorded for S "
        "seconds, print what each process is doing (a dead feeder first, where its threads "
        "wait); the final report then says so first (default 60; 0: never)",
    )
    from gyreprof.commands._args import add_verbose

    add_verbose(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(func=run)


STARTUP_TIMEOUT_S = 60.0


def _warmup_steps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"give a whole number of trainer steps >= 0, got {text!r}"
        ) from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"give a whole number of trainer steps >= 0, got {n}")
    if n >= 1 << 63:
        raise argparse.ArgumentTypeError(f"at most {(1 << 63) - 1} steps, got {n}")
    return n


def _server_metrics(text: str) -> str:
    from gyreprof.integrations.http.server_metrics import OFF, check_url

    text = text.strip()
    if text.lower() == OFF:
        return OFF
    urls = [u.strip() for u in text.split(",") if u.strip()]
    if not urls:
        raise argparse.ArgumentTypeError("give a metrics page's URL (http://host:port/metrics)")
    try:
        return ",".join(check_url(u) for u in urls)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _stacks_hz(text: str) -> float:
    from gyreprof.integrations._auto.options import MAX_STACKS_HZ

    try:
        hz = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"give a rate in samples per second, got {text!r}"
        ) from None
    if not (0.0 < hz <= MAX_STACKS_HZ):  # also refuses NaN and infinity
        raise argparse.ArgumentTypeError(
            f"give a rate above 0 and at most {MAX_STACKS_HZ:g} per second (--no-stacks turns "
            f"the sampler off), got {text!r}"
        )
    return hz


def _warmup_seconds(text: str) -> float:
    from gyreprof._support.validate import MAX_WARMUP_S

    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of seconds >= 0, got {text!r}") from None
    if not (0.0 <= s <= MAX_WARMUP_S):  # also refuses NaN and infinity
        raise argparse.ArgumentTypeError(
            f"give a number of seconds from 0 to {MAX_WARMUP_S:g}, got {text!r}"
        )
    return s


def _check_output_file(opt: str, path: str | None) -> None:
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{opt} {path}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if p.exists():
        ok = os.access(p, os.W_OK)
    else:
        ok = parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        why = "no such directory" if not parent.is_dir() else "not writable"
        raise UsageError(f"{opt} {path}: cannot write there ({why}); nothing was run")


def _check_save_dir(path: str | None) -> None:
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--save {path}: exists and is not a directory; nothing was run")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--save {path}: {probe} is not writable; nothing was run")


def _resolve(command: list[str]) -> list[str] | int:
    """The argv to start, or an exit code (127 not found, 126 not executable)."""
    first = command[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            print(f"gyreprof run: {first}: no such script", file=sys.stderr)
            return 127
        return [sys.executable, *command]
    if os.sep in first:
        if not Path(first).exists():
            print(f"gyreprof run: {first}: command not found", file=sys.stderr)
            return 127
        if not os.access(first, os.X_OK) or Path(first).is_dir():
            print(f"gyreprof run: {first}: not an executable file", file=sys.stderr)
            return 126
        return command
    found = shutil.which(first)
    if found is None:
        print(
            f"gyreprof run: {first}: command not found (not on PATH); give the path of the "
            "program, or a script ending in .py",
            file=sys.stderr,
        )
        return 127
    return command


def _environment(run_dir: Path, run_id: str) -> dict[str, str]:
    import gyreprof

    env = dict(os.environ)
    site = run_dir / "site"
    site.mkdir()
    _put_sitecustomize(site)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(site) + (os.pathsep + old if old else "")
    env["GYREPROF_RUN_DIR"] = str(run_dir)
    env["GYREPROF_RUN_ID"] = run_id
    # for a Python that cannot import gyreprof itself: a folder with gyreprof alone in it,
    # so that it does not get every package of this Python's site-packages
    pkg = run_dir / "pkg"
    pkg.mkdir()
    (pkg / "gyreprof").symlink_to(Path(gyreprof.__file__).resolve().parent, True)
    env["GYREPROF_RUN_PATH"] = str(pkg)
    env.pop("GYREPROF_RUN_MAIN_PID", None)
    env.pop("GYREPROF_STARTUP_TIMEOUT", None)
    from gyreprof.integrations._auto import options

    env.pop(options.ENV_WARMUP_STEPS, None)  # an outer run's settings are not this run's
    env.pop(options.ENV_WARMUP_S, None)
    env.pop(options.ENV_STACKS_HZ, None)
    return env


def _put_sitecustomize(site: Path) -> None:
    """``site/sitecustomize.py``: a copy of :data:`SITECUSTOMIZE` with its mtime and, where
    this installation compiled it, its bytecode (which names the source's mtime and size:
    each Python of this version in the run loads it instead of compiling the source, ~14 M
    instructions a process; another version, or stale bytecode, compiles as before)."""
    from gyreprof._support.io import write_atomic

    target = site / "sitecustomize.py"
    st = os.stat(SITECUSTOMIZE)
    write_atomic(target, SITECUSTOMIZE.read_bytes())
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    if sys.pycache_prefix is not None:  # bytecode kept outside the run folder: not copied
        return
    from importlib.util import cache_from_source

    try:
        code = Path(cache_from_source(str(SITECUSTOMIZE))).read_bytes()
    except (OSError, NotImplementedError):  # not compiled here (a checkout run with -B)
        return
    cached = Path(cache_from_source(str(target)))
    try:
        cached.parent.mkdir()
        write_atomic(cached, code)
    except OSError:  # a file-size limit, a full disk: each process compiles the source
        pass


def _save_raw(report: Any, directory: Path) -> list[Path]:
    import json

    from gyreprof._support.io import check_target, write_atomic

    check_target(directory)  # a link planted at DIR in a shared folder
    directory.mkdir(parents=True, exist_ok=True)
    from gyreprof.integrations._auto.collect import saved_stems

    written = []
    # a merged group's snapshot once (group-<n>.sampler.snap), its processes' own figures
    # in the index
    groups: dict[int, int] = {}
    for e in report.processes:
        if e.group is not None and e.sampler is None and id(e.group) not in groups:
            groups[id(e.group)] = len(groups)
            path = directory / f"group-{groups[id(e.group)]}.sampler.snap"
            write_atomic(path, e.group.to_bytes())
            written.append(path)
    # each process image its own name (an exec keeps the pid): none overwrites another
    for e, stem in zip(report.processes, saved_stems(report.processes), strict=True):
        for side in ("sampler", "trainer"):
            snap = getattr(e, side)
            if side == "trainer" and any(u.as_trainer for u in e.user):
                continue  # the user's own profiler, saved as such below
            if snap is not None:
                path = directory / f"{stem}.{side}.snap"
                write_atomic(path, snap.to_bytes())
                written.append(path)
        if e.sites is not None:  # gyreprof report DIR names the same code sites
            path = directory / f"{e.role}-{e.pid}.sites.json"
            write_atomic(path, e.sites.to_json().encode())
            written.append(path)
        for u in e.user:
            path = directory / f"{stem}.user-{u.index}.snap"
            write_atomic(path, u.snapshot.to_bytes())
            written.append(path)
    written.append(_save_run_facts(report, directory))
    if report.rollouts is not None:  # gyreprof report DIR shows them as the run did
        from gyreprof.integrations._auto import rollout_record

        written.append(rollout_record.save_report(report.rollouts, directory))
    index = directory / "processes.json"
    # each process's loop shapes too: gyreprof report DIR judges the run as it was
    rows = [{**e.to_dict(), "loops": list(e.loops), "image": e.image} for e in report.processes]
    for row, e in zip(rows, report.processes, strict=True):
        if id(e.group) in groups and e.figures is not None:
            row.update(group=groups[id(e.group)], figures=e.figures.to_dict())
    text = json.dumps(rows, indent=2) + "\n"
    write_atomic(index, text.encode())
    written.append(index)
    return written


#: what a --save folder keeps of the run itself (gyreprof report DIR reads it)
RUN_FILE = "run.json"
RUN_FILE_FORMAT = "gyreprof.run-save/1"


def _save_run_facts(report: Any, directory: Path) -> Path:
    """``run.json``: the command line, its exit code and how it ended, the launcher's
    settings that change the verdict, and the report's notes."""
    import json

    from gyreprof._support.io import write_atomic

    first = report.nothing_recognised() if not report.recognised else None
    facts = {
        "format": RUN_FILE_FORMAT,
        "command": list(report.command),
        "exit_code": report.exit_code,
        "ended_by": report.ended_by,
        "received": list(report.received),
        "python_processes": report.python_processes,
        "loop": report.loop,
        "warmup_given": report.warmup_given,
        "notes": [n for n in report.notes if n != first],
    }
    path = directory / RUN_FILE
    write_atomic(path, (json.dumps(facts, indent=2) + "\n").encode())
    return path


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "give the command to profile after --, e.g. gyreprof run -- python train.py"
        )
    _check_output_file("--json", args.json)
    _check_output_file("--html", args.html)
    if args.html:
        from gyreprof.commands._args import require_extra

        require_extra("--html (its pictures)", "matplotlib", "plot")
    _check_save_dir(args.save)
    timeout = getattr(args, "startup_timeout", STARTUP_TIMEOUT_S)
    if timeout is None or not (timeout >= 0) or timeout == float("inf"):
        raise UsageError(f"--startup-timeout {timeout}: give a number of seconds >= 0")
    stall = getattr(args, "stall_s", 60.0)
    if stall is None or not (stall >= 0) or stall == float("inf"):
        raise UsageError(f"--stall-s {stall}: give a number of seconds >= 0")
    argv = _resolve(command)
    if isinstance(argv, int):
        return argv

    _remove_stale_run_dirs()
    run_dir = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))
    run_id = os.urandom(6).hex()  # 12 hex digits (uuid would cost the launcher ~5 ms)
    lock = -1
    try:
        try:
            lock = _hold_run_dir(run_dir)
            env = _environment(run_dir, run_id)
        except OSError as exc:
            print(
                f"gyreprof run: cannot prepare the run folder {run_dir}: {exc}; nothing was run",
                file=sys.stderr,
            )
            return 1
        return _run_and_report(args, command, argv, env, run_dir, run_id)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if lock >= 0:
            os.close(lock)


RUN_DIR_PREFIX = "gyreprof-run-"
_LOCK_NAME = "launcher.lock"


def _hold_run_dir(run_dir: Path) -> int:
    """Lock ``run_dir`` for this launcher's life (the lock goes with the process, however
    it ends: a later run removes a folder whose lock nobody holds). The lock file is
    locked before it takes its name, so no one sees it unlocked."""
    try:
        import fcntl
    except ImportError:
        return -1
    tmp = run_dir / f".{_LOCK_NAME}.{os.getpid()}"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, run_dir / _LOCK_NAME)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_stale_run_dirs() -> None:
    """Remove the run folders of launchers that ended without cleaning up (SIGKILL): this
    user's ``gyreprof-run-*`` folders in the temp folder whose lock is free."""
    try:
        import fcntl
    except ImportError:
        return
    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(RUN_DIR_PREFIX)]
    except OSError:
        return
    me = os.geteuid()
    for name in names:
        folder = os.path.join(base, name)
        try:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != me:
                continue
            fd = os.open(
                os.path.join(folder, _LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except OSError:
            continue  # no lock file: an older launcher's, or one being made now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its launcher is running
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def _run_and_report(
    args: argparse.Namespace,
    command: list[str],
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    run_id: str,
) -> int:
    # only what starting the command needs; the report's modules load once it has ended
    from gyreprof.commands import _startup
    from gyreprof.integrations._auto import options

    warm = (getattr(args, "warmup_steps", None), getattr(args, "warmup_s", None))
    hz = 0.0 if getattr(args, "no_stacks", False) else getattr(args, "stacks_hz", None)
    env.update(options.environment(*warm, getattr(args, "server_metrics", None), stacks_hz=hz))
    timeout = float(getattr(args, "startup_timeout", STARTUP_TIMEOUT_S) or 0.0)
    if timeout > 0:
        env[_startup.ENV_STARTUP_TIMEOUT] = f"{timeout:g}"
    started = time.monotonic()
    stall_s = float(getattr(args, "stall_s", _startup.STALL_S) or 0.0)
    watch = _startup.Watch(run_dir, timeout, started, stall_s) if timeout or stall_s else None
    supervised = _supervise(argv, env, watch)
    if isinstance(supervised, str):
        print(f"gyreprof run: cannot start {argv[0]}: {supervised}", file=sys.stderr)
        return 126
    code, passed, shared, grouped = supervised
    elapsed = time.monotonic() - started
    notes = []
    if passed:
        names = ", ".join(dict.fromkeys(signal.Signals(s).name for s in passed))
        notes.append(f"gyreprof run received {names} and passed it to the command")
    if shared:
        names = ", ".join(dict.fromkeys(signal.Signals(s).name for s in shared))
        notes.append(
            f"gyreprof run received {names} from the terminal, which sent it to the command "
            "too (not passed on a second time)"
        )
    if grouped:
        names = ", ".join(dict.fromkeys(signal.Signals(s).name for s in grouped))
        notes.append(
            f"gyreprof run received {names} sent to its process group, which the command "
            "is in too (its standard input is a terminal): not passed on a second time"
        )
    left = _wait_for_run(run_dir, run_id, _GRACE_S)
    if left:
        notes.append(
            f"{len(left)} process(es) of the run still running {_GRACE_S:g} s after the "
            f"command ended (pid {', '.join(map(str, left[:8]))}); their numbers so far come "
            "from their live segments"
        )
    exit_code = code if code >= 0 else 128 - code
    if getattr(args, "warmup_steps", None):
        notes.append(
            f"--warmup-steps {args.warmup_steps} excluded the trainer's first "
            f"{args.warmup_steps} steps; the sampler marks no steps and keeps its warm-up "
            "(--warmup-s excludes the first seconds of both)"
        )
    from gyreprof._support.format import safe_text
    from gyreprof._support.io import write_atomic
    from gyreprof.integrations._auto.collect import collect_run

    try:
        report = collect_run(
            run_dir,
            run_id,
            command,
            exit_code,
            notes=notes,
            signal_num=-code if code < 0 else None,
            loop=getattr(args, "loop", None),
            received=tuple(
                dict.fromkeys(signal.Signals(s).name for s in [*passed, *shared, *grouped])
            ),
            warmup_given=warm != (None, None),
        )
    except Exception as exc:  # noqa: BLE001 - the command's exit code matters more
        print(
            f"gyreprof run: the run's records in {run_dir} could not be read "
            f"({type(exc).__name__}: {safe_text(str(exc))[:300]}); no report",
            file=sys.stderr,
        )
        return exit_code

    stalled = watch.final_words(elapsed) if watch is not None else []
    if stalled:  # said first: the numbers below do not cover the time nothing moved
        print("\ngyreprof run: " + "\n  ".join(safe_text(t) for t in stalled), file=sys.stderr)
    from gyreprof.render.text import run_report

    text = run_report(report, verbose=bool(getattr(args, "verbose", False)))
    print(f"\n{safe_text(text)}\n(wall time {elapsed:.3g} s)", file=sys.stderr, flush=True)
    if args.json:
        try:
            write_atomic(Path(args.json), (report.to_json() + "\n").encode())
        except OSError as exc:
            print(f"gyreprof run: --json {args.json}: {exc}", file=sys.stderr)
    if args.html:
        _write_html(report, args.html, command)
    if args.save:
        try:
            _save_raw(report, Path(args.save))
        except OSError as exc:
            print(f"gyreprof run: --save {args.save}: {exc}", file=sys.stderr)
    from gyreprof.live._ended import remember_run  # gyreprof top PID: where the run went

    kept = {"--json": args.json, "--save": args.save, "--html": args.html}
    remember_run([os.getpid(), *(p.pid for p in report.processes)], command, exit_code, kept)
    return exit_code


# ------------------------------------------------------------------ the command's process

#: Signals passed on to the command (unless the terminal sent them to it already).
FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
_SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel sent (the terminal's ^C, ^\\, hangup)
_GRACE_S = 10.0  # how long the report waits for the run's other processes to save
PR_SET_PDEATHSIG = 1


def _death_signal_setter() -> Any:
    """``prctl(PR_SET_PDEATHSIG, SIGTERM)`` for the child, or None (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return prctl


def _supervise(
    argv: list[str], env: dict[str, str], watch: Any = None
) -> tuple[int, list[int], list[int], list[int]] | str:
    """Run ``argv`` to its end: (its wait status, signals passed on, signals it got from the
    terminal itself, signals a process sent to the group it shares with the launcher), or
    why it could not start.

    The launcher blocks the signals it forwards and takes them with ``sigtimedwait``.
    Each signal reaches the command once, whoever sent it (see :func:`_take`):

    - Without a terminal on its standard input the command runs in a process group
      of its own. A signal sent to the launcher's group (``kill -INT -PGID``, what
      process managers, job schedulers and scripts send) or to its pid alone then
      reaches the launcher only, which passes it on: once either way.
    - With a terminal there, the command stays in the terminal's foreground group
      (so it reads the terminal, and the terminal's ^C reaches it). A signal the
      kernel sent (the terminal's ^C, ^\\, hangup) reached it already and is not sent
      again. A SIGINT or SIGQUIT that a process sent cannot be told apart from one
      sent to the whole group, which reached the command too: the group's wins, and
      it is not sent again (a SIGINT sent to the launcher's pid alone then does not
      reach the command: send it to the command, or to the group). Other signals
      are passed on unless the command has them pending already.

    The child gets the launcher's death as SIGTERM (``PR_SET_PDEATHSIG``), so it never
    runs on unnoticed when the launcher is killed.
    """
    if not hasattr(signal, "sigtimedwait"):
        return _supervise_with_handlers(argv, env)  # no start-up watch there
    parent = os.getpid()
    prctl = _death_signal_setter()
    wanted = {*FORWARDED, signal.SIGCHLD}
    own_group = not _terminal_on_stdin()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)

    def in_child() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if own_group:
            os.setpgid(0, 0)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the launcher died before the call above
                os._exit(128 + signal.SIGTERM)

    passed: list[int] = []
    shared: list[int] = []
    grouped: list[int] = []
    try:
        try:
            child = subprocess.Popen(argv, env=env, preexec_fn=in_child)  # noqa: PLW1509
        except (OSError, subprocess.SubprocessError) as exc:
            return str(getattr(exc, "strerror", None) or exc)
        if own_group:
            try:  # here too: a signal that comes before the child's own call finds it moved
                os.setpgid(child.pid, child.pid)
            except OSError:
                pass  # it exec'd already (its own call did it) or has ended
        try:
            pgid = os.getpgid(child.pid)
        except OSError:
            pgid = -1
        while True:
            code = child.poll()
            if code is not None:
                break
            wait_s = 1.0 if watch is None else watch.next_wait(1.0)
            info = signal.sigtimedwait(wanted, wait_s)
            if watch is not None:
                watch.check()
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            try:  # the command may have moved to a process group of its own since
                pgid = os.getpgid(child.pid)
            except OSError:
                pass
            _take(info, child, pgid, passed, shared, grouped)
        while True:  # what came in as the command ended: noted, not delivered to us later
            info = signal.sigtimedwait(wanted, 0)
            if info is None:
                break
            if info.si_signo != signal.SIGCHLD:
                (shared if _from_terminal(info, pgid) else passed).append(info.si_signo)
        return code, passed, shared, grouped
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _from_terminal(info: Any, pgid: int) -> bool:
    """Sent by the kernel (the terminal) while the command shares our process group: the
    terminal signals the whole foreground group, so the command got it too."""
    return bool(info.si_code == _SI_KERNEL and pgid == os.getpgrp())


def _terminal_on_stdin() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


#: signals a terminal, tmux or a shell sends to a whole process group
_GROUP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGQUIT") if hasattr(signal, n))


def _pending_in(pid: int, signo: int) -> bool:
    """``signo`` waits to be delivered to process ``pid`` (its own or its threads')."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("SigPnd:", "ShdPnd:")):
                    if int(line.split()[1], 16) >> (signo - 1) & 1:
                        return True
    except (OSError, ValueError, IndexError):
        return False
    return False


def _take(
    info: Any,
    child: subprocess.Popen[bytes],
    pgid: int,
    passed: list[int],
    shared: list[int],
    grouped: list[int],
) -> None:
    """Pass ``info``'s signal on, or not when the command has it already (see
    :func:`_supervise`): ``shared`` gets the terminal's, ``grouped`` those a process
    sent to the group the command shares with the launcher."""
    if _from_terminal(info, pgid):
        shared.append(info.si_signo)
        return
    if pgid == os.getpgrp() and (
        info.si_signo in _GROUP_SIGNALS or _pending_in(child.pid, info.si_signo)
    ):
        grouped.append(info.si_signo)
        return
    passed.append(info.si_signo)
    try:
        child.send_signal(info.si_signo)
    except OSError:
        pass


def _supervise_with_handlers(
    argv: list[str], env: dict[str, str]
) -> tuple[int, list[int], list[int], list[int]] | str:
    """Without ``sigtimedwait`` (not Linux): forward SIGTERM, SIGHUP, SIGUSR1/2; SIGINT
    and SIGQUIT only when the command has its own process group (it never does here)."""
    passed: list[int] = []
    shared: list[int] = []
    try:
        child = subprocess.Popen(argv, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(getattr(exc, "strerror", None) or exc)

    def forward(signum: int, frame: Any) -> None:
        if signum in (signal.SIGINT, getattr(signal, "SIGQUIT", -1)) and os.isatty(0):
            shared.append(signum)  # from the terminal, most likely: the command has it too
            return
        passed.append(signum)
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        code = child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return code, passed, shared, []


def _wait_for_run(run_dir: Path, run_id: str, grace_s: float) -> list[int]:
    """Wait (at most ``grace_s``) for the run's processes that recorded but have not saved
    yet: workers that outlive the command's main process (a SIGTERM to the launcher
    reaches the main process only; its workers save as they leave). The pids still
    running at the end."""
    deadline = time.monotonic() + grace_s
    delay = 0.005
    left: list[int] = []
    try:
        while True:
            left = [pid for pid in _unsaved(run_dir) if _in_run(pid, run_id)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(delay)
            delay = min(0.1, delay * 2)
    except KeyboardInterrupt:  # Ctrl-C while waiting: report what there is now
        return left


def _unsaved(run_dir: Path) -> list[int]:
    started, done = set(), set()
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    for name in names:
        head, _, tail = name.partition(".")
        if head.isascii() and head.isdigit():
            if tail == "start.json":
                started.add(int(head))
            elif tail == "done.json":
                done.add(int(head))
    return sorted(started - done)


def _in_run(pid: int, run_id: str) -> bool:
    """``pid`` is running (not a zombie) and belongs to this run (its environment names it)."""
    if pid == os.getpid() or pid <= 1:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read(4096)
        state = stat_line.rpartition(b")")[2].split()[:1]
        if state and state[0] in (b"Z", b"X"):
            return False
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(1 << 20)
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:  # no /proc: alive is all we can tell
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True
    return f"GYREPROF_RUN_ID={run_id}".encode() in environ.split(b"\0")


def _write_html(report: Any, path: str, command: list[str]) -> None:
    if report.sampler is None:
        print(f"gyreprof run: --html {path}: no sampler phases to show", file=sys.stderr)
        return
    try:
        from gyreprof._support.io import write_atomic
        from gyreprof.export import html_report

        text = html_report(report, None, title="gyreprof run: " + " ".join(command))
        write_atomic(Path(path), str(text).encode("utf-8"))
    except (ImportError, ValueError, OSError) as exc:
        print(f"gyreprof run: --html {path}: {exc}", file=sys.stderr)
