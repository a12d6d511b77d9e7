"""Copied by `gyreprof run` into its run folder (site/sitecustomize.py), first on every
process's path: instrument this process, then run any other sitecustomize.

Never imported as a module of gyreprof. It runs in whatever Python the command starts, so
it uses the standard library alone; the copy takes this file's compiled form along where
the installation has one (``commands.run._environment``), so that no process of the run
compiles it again."""

import os as _os
import sys as _sys


def _gyreprof_refused(why: object) -> None:
    """Say that this process is not instrumented, and why: on stderr, and in the run's
    folder (``<pid>.uninstrumented``), where the report reads it."""
    print(
        f"gyreprof run: pid {_os.getpid()} ({_sys.executable}) is not instrumented: {why}",
        file=_sys.stderr,
    )
    try:
        path = _os.path.join(_os.environ["GYREPROF_RUN_DIR"], f"{_os.getpid()}.uninstrumented")
        flags = _os.O_CREAT | _os.O_WRONLY | _os.O_TRUNC | getattr(_os, "O_NOFOLLOW", 0)
        fd = _os.open(path, flags, 0o600)
        try:
            _os.write(fd, str(why).encode("utf-8", "replace")[:2000])
        finally:
            _os.close(fd)
    except (OSError, KeyError):
        pass


def _gyreprof_start() -> None:
    try:
        from gyreprof.integrations._auto import bootstrap
    except ImportError:
        extra = _os.environ.get("GYREPROF_RUN_PATH")
        if not extra:
            return
        # a folder that holds gyreprof alone (not the site-packages it came from)
        _sys.path.append(extra)
        try:
            from gyreprof.integrations._auto import bootstrap
        except ImportError as exc:
            if extra in _sys.path:
                _sys.path.remove(extra)
            for name in [m for m in _sys.modules if m == "gyreprof" or m.startswith("gyreprof.")]:
                del _sys.modules[name]
            _gyreprof_refused(exc)
            return
    try:
        bootstrap.start()
    except ImportError as exc:
        _gyreprof_refused(exc)
    except Exception as exc:
        _gyreprof_refused(repr(exc))


def _gyreprof_chain() -> None:
    here = _os.path.dirname(_os.path.abspath(__file__))
    mine = _sys.modules.pop("sitecustomize", None)
    saved = list(_sys.path)
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    try:
        __import__("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            print(
                f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}",
                file=_sys.stderr,
            )
        if mine is not None:
            _sys.modules["sitecustomize"] = mine
    except Exception as exc:
        print(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=_sys.stderr
        )
    finally:
        _sys.path[:] = saved


if _os.environ.get("GYREPROF_RUN_DIR"):
    _gyreprof_start()
_gyreprof_chain()
