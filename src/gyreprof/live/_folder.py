"""The folder a user's live segments go to, and whether a folder may be trusted (the
rules are in ``gyreprof.live._layout``'s "Where (trust)").

Apart from the segment layout so that what only needs the folder (``gyreprof run``'s
end-of-run note, ``live._ended``) loads no segment reader: ``_layout`` re-exports every
name here."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import tempfile
from pathlib import Path

ENV_DIR = "GYREPROF_LIVE_DIR"


def base_dir() -> Path:
    """``$GYREPROF_LIVE_DIR``, else ``/dev/shm``, else the temp directory."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


def euid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def folder_trusted_for(st: os.stat_result, uid: int) -> bool:
    """Whether only ``uid`` (or root) can create files in the folder ``st`` describes."""
    return (
        stat_mod.S_ISDIR(st.st_mode)
        and st.st_uid in (uid, 0)
        and not st.st_mode & (stat_mod.S_IWGRP | stat_mod.S_IWOTH)
    )


def _home_of(uid: int) -> Path | None:
    if uid == euid() and os.environ.get("HOME"):
        return Path(os.environ["HOME"])
    try:
        import pwd

        return Path(pwd.getpwuid(uid).pw_dir)
    except (ImportError, KeyError):
        return None


def candidate_dirs(uid: int) -> list[Path]:
    """Folders where ``uid``'s segments may be, in the order a writer tries them."""
    base = base_dir()
    out = [base, base / f"gyreprof-{uid}"]
    home = _home_of(uid)
    if home is not None:
        out.append(home / ".cache" / "gyreprof-live")
    # where HOME is not writable (a service user): the runtime folder, then the temp dir
    runtime = Path((os.environ.get("XDG_RUNTIME_DIR") if uid == euid() else None) or "")
    if not str(runtime) or str(runtime) == ".":
        runtime = Path(f"/run/user/{uid}")
    if runtime.is_dir():  # never created here: the session manager owns it
        out.append(runtime / "gyreprof-live")
    tmp = Path(tempfile.gettempdir()) / f"gyreprof-live-{uid}"
    if tmp not in out:
        out.append(tmp)
    return out


def trusted_dir_stat(path: Path, uid: int, *, follow: bool) -> os.stat_result | None:
    """``path``'s stat when it is a folder trusted for ``uid``; None otherwise or absent."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return st if folder_trusted_for(st, uid) else None


def _make_private_dir(path: Path, uid: int) -> bool:
    """Create (or take back) ``path`` as a 0700 folder of ``uid``; False if squatted."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat_mod.S_ISDIR(st.st_mode) or st.st_uid != uid:
        return False  # a link, a file, or another user's folder: squatted
    if st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700, follow_symlinks=False)
        except (OSError, NotImplementedError):
            return False
    return trusted_dir_stat(path, uid, follow=False) is not None


def segment_dir(*, create: bool = False) -> Path:
    """The folder this process's segments go to (see the module doc).

    ``create=True`` (the writer) makes the per-user folder when needed and
    raises OSError when no trusted folder can be had.
    """
    uid = euid()
    base, per_user, *rest = candidate_dirs(uid)
    if trusted_dir_stat(base, uid, follow=True) is not None:
        return base
    if not create:
        if trusted_dir_stat(per_user, uid, follow=False) is not None or not rest:
            return per_user
        for fallback in rest:
            if trusted_dir_stat(fallback, uid, follow=False) is not None:
                return fallback
        return per_user
    if base.is_dir() or not os.environ.get(ENV_DIR):
        if _make_private_dir(per_user, uid):
            return per_user
    else:
        try:
            os.makedirs(base, 0o700, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot create {base} ({exc.strerror})") from None
        if trusted_dir_stat(base, uid, follow=True) is not None:
            return base
        if _make_private_dir(per_user, uid):
            return per_user
    tried = [f"{per_user} (another user's, a link or not a folder)"]
    for fallback in rest:
        try:
            os.makedirs(fallback.parent, 0o700, exist_ok=True)
        except OSError as exc:
            tried.append(f"{fallback} ({exc.strerror or exc})")
            continue
        if _make_private_dir(fallback, uid):
            return fallback
        tried.append(f"{fallback} (not writable, or not private)")
    raise PermissionError(
        errno.EACCES,
        "no private folder for live segments: tried " + "; ".join(tried) + f". Set {ENV_DIR} "
        "to a folder only you can write, or pass live=False",
    )
