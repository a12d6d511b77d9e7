"""Probe the endpoints a stuck process talks to, as ``nc -vz`` would (private helper of
the doctor).

Only loopback addresses and the addresses the target itself is connected to are
ever probed (one TCP connect each, at most :data:`MAX_PROBES`): never a scan.
The connect is made from the target's network namespace: where the namespaces are
the same, that is ours; otherwise a thread of the doctor enters the target's
(``os.setns`` on Python 3.12+, the C library's ``setns`` through ``ctypes`` on
3.10-3.11; a thread's network namespace is its own, so the rest of the process stays
in ours) and makes the connect there. ``setns`` needs ``CAP_SYS_ADMIN``: where it
cannot be entered, nothing is probed and the words say the probe is not valid for
that process -- the host's answer is never given as the target's.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass

from gyreprof._support.errors import InvalidValueError

MAX_PROBES = 4
#: each probe waits this long at most; the probes run side by side, so the doctor
#: answers within its interval plus about this (``gyreprof doctor`` answers in 5 s)
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ProbeResult:
    target: str  # "127.0.0.1:18004" or a URL
    outcome: str  # "refused", "no answer", "answers", "error", "not probed"
    words: str


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ns_inode(pid: int | str) -> str | None:
    try:  # by hand: psutil has no network namespaces
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_words(pid: int) -> tuple[str, bool]:
    """(where the probes come from, whether to enter the target's namespace)."""
    mine, theirs = _ns_inode("self"), _ns_inode(pid)
    if mine is None or theirs is None:
        return "probed from this process's network namespace (the target's is not readable)", False
    if mine == theirs:
        return "probed from the target's network namespace (the same as ours)", False
    return "the target has its own network namespace", True


_CLONE_NEWNET = 0x40000000


def _libc_setns() -> Callable[[int, int], None] | None:
    """``setns(fd, nstype)`` of the C library through ``ctypes`` (Python before 3.12 has
    no ``os.setns``), raising OSError as ``os.setns`` does; None where there is none."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.setns
    except (ImportError, OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int]
    call.restype = ctypes.c_int

    def setns(fd: int, nstype: int) -> None:
        if call(fd, nstype) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return setns


def _setns() -> Callable[[int, int], None] | None:
    return getattr(os, "setns", None) or _libc_setns()


def _in_namespace(pid: int, work: Callable[[], object]) -> tuple[object, str | None]:
    """Run ``work()`` in a thread that entered ``pid``'s network namespace; (result, why not)."""
    setns = _setns()
    if setns is None:
        return None, "no setns here (neither os.setns nor the C library's)"
    box: dict[str, object] = {}

    def run() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)  # setns needs the file itself
            try:
                setns(fd, getattr(os, "CLONE_NEWNET", _CLONE_NEWNET))
            finally:
                os.close(fd)
        except OSError as exc:
            box["why"] = f"could not enter its namespace ({exc.strerror}; needs CAP_SYS_ADMIN)"
            return
        box["result"] = work()

    t = threading.Thread(target=run, name="gyreprof-doctor-probe", daemon=True)
    t.start()
    t.join(PROBE_TIMEOUT_S * 3)
    why = box.get("why")
    return box.get("result"), (str(why) if why is not None else None)


def tcp_probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """One TCP connect to ``host:port``: refused, no answer within the timeout, or accepted."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            took = time.monotonic() - t0
    except ConnectionRefusedError:
        return ProbeResult(where, "refused", f"nothing listens on {where} (connection refused)")
    except TimeoutError:
        return ProbeResult(
            where, "no answer", f"{where}: no answer to a TCP connect in {timeout_s:g} s"
        )
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return ProbeResult(where, "refused", f"nothing listens on {where} (connection refused)")
        return ProbeResult(where, "error", f"{where}: connect failed ({exc.strerror or exc})")
    return ProbeResult(
        where, "answers", f"{where} answers: something listens (TCP connect in {took * 1e3:.0f} ms)"
    )


def http_probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """One HTTP GET of ``url``: its status, or that it gave no answer in time."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - checked scheme
            status = resp.status
    except urllib.error.HTTPError as exc:
        return ProbeResult(url, "answers", f"{url} answers HTTP {exc.code} ({exc.reason})")
    except TimeoutError:
        return ProbeResult(url, "no answer", f"{url}: listening, no answer in {timeout_s:g} s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return ProbeResult(url, "no answer", f"{url}: listening, no answer in {timeout_s:g} s")
        if isinstance(reason, ConnectionRefusedError):
            return ProbeResult(url, "refused", f"{url}: nothing listens (connection refused)")
        return ProbeResult(url, "error", f"{url}: request failed ({reason})")
    except OSError as exc:
        return ProbeResult(url, "error", f"{url}: request failed ({exc})")
    took = time.monotonic() - t0
    return ProbeResult(url, "answers", f"{url} answers HTTP {status} in {took:.2f} s")


def check_url(url: str) -> str:
    """The URL if it is an http(s) URL with a host; ValueError otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValueError(
            f"--probe needs an http:// or https:// URL with a host, got {url!r}"
        )
    return url


def probe_all(
    pid: int,
    endpoints: Collection[tuple[str, int]],
    connected: Collection[str],
    urls: Collection[str] = (),
    timeout_s: float = PROBE_TIMEOUT_S,
) -> list[str]:
    """Probe each endpoint (and each health URL): one line of words per probe.

    ``connected``: the remote hosts the target holds sockets to; anything else that
    is not loopback is not probed, and the words say so.
    """
    out: list[str] = []
    ns_words, enter = namespace_words(pid)
    allowed = {h.strip("[]") for h in connected}
    todo: list[tuple[str, int]] = []
    for host, port in endpoints:
        if not (is_loopback(host) or host.strip("[]") in allowed):
            out.append(
                f"{host}:{port} not probed (only loopback and the addresses the process is "
                "connected to are probed)"
            )
            continue
        if (host, port) not in todo:
            todo.append((host, port))
    jobs: list[tuple[str, Callable[..., ProbeResult], tuple[object, ...]]] = []
    for host, port in todo[:MAX_PROBES]:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        jobs.append((where, tcp_probe, (host, port, timeout_s)))
    for url in urls:
        host = urllib.parse.urlsplit(url).hostname or ""
        if not (is_loopback(host) or host in allowed):
            out.append(
                f"probe {url} not sent (only loopback and the addresses the process is "
                "connected to are probed)"
            )
            continue
        jobs.append((url, http_probe, (url, timeout_s)))
    if not jobs:
        return out
    # side by side: n probes that get no answer take one timeout, not n
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="gyreprof-probe") as pool:
        done = [
            pool.submit(_probe_there, pid, enter, ns_words, what, probe, *args)
            for what, probe, args in jobs
        ]
        return out + [f.result() for f in done]


def _probe_there(
    pid: int,
    enter: bool,
    ns_words: str,
    what: str,
    probe: Callable[..., ProbeResult],
    *args: object,
) -> str:
    """One probe, from the target's network namespace: ours where it is the same, entered
    otherwise; where it cannot be entered, no probe (the host's answer is not the
    target's)."""
    if not enter:
        return f"probe: {probe(*args).words} [{ns_words}]"
    got, why = _in_namespace(pid, functools.partial(probe, *args))
    if isinstance(got, ProbeResult):
        return f"probe: {got.words} [probed from the target's network namespace]"
    return (
        f"probe of {what} not valid for this process: it has its own network namespace and "
        f"{why or 'the probe gave no answer'}; what this host answers says nothing about it, "
        f"so nothing was probed (run the probe inside it: nsenter -t {pid} -n ...)"
    )
