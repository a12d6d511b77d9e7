"""How many CPU cores a process may really use: CPU affinity and cgroup CPU quota.

``os.cpu_count()`` answers "how many CPUs does the machine have", which is the
wrong question inside a container or under ``taskset``: a job limited to two
CPUs by affinity, or to ``cpu.max = 200000 100000`` by its cgroup, runs eight
BLAS threads on two cores whatever the machine has. This module reads both
limits for a given pid (Linux; elsewhere the affinity from psutil or the CPU
count) and reports the smaller one.

Only plain file reads; never raises for a missing or unreadable cgroup file
(the quota is then reported as unknown, ``None``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from gyreprof._support.errors import InvalidValueError
from gyreprof._support.format import fmt_count
from gyreprof.model._serial import Record

__all__ = ["CpuLimits", "cpu_limits", "parse_cpu_max", "cgroup_quota_cores"]


@dataclass(frozen=True)
class CpuLimits(Record):
    """CPU capacity available to one process.

    ``cores_available`` is the smaller of ``affinity`` (CPUs the process may be
    scheduled on) and ``quota_cores`` (cgroup CPU bandwidth in cores, ``None``
    when there is no quota or it cannot be read). ``cpu_count`` is the
    machine's logical CPU count, for context only.
    """

    cores_available: float
    affinity: int
    quota_cores: float | None
    cpu_count: int
    quota_source: str | None

    def describe(self) -> str:
        """One plain-words line.

        For example ``2 cores available (affinity 2 of 16 CPUs, no cgroup quota)``.
        """
        quota = (
            f"cgroup quota {fmt_count(self.quota_cores)} cores"
            if self.quota_cores is not None
            else "no cgroup quota"
        )
        return (
            f"{fmt_count(self.cores_available)} cores available "
            f"(affinity {self.affinity} of {self.cpu_count} CPUs, {quota})"
        )


def parse_cpu_max(text: str) -> float | None:
    """Parse a cgroup v2 ``cpu.max`` file (``"QUOTA PERIOD"`` or ``"max PERIOD"``) into cores.

    Returns ``None`` for no limit. Raises ``ValueError`` for text that is not in
    that format.
    """
    parts = text.split()
    if len(parts) not in (1, 2):
        raise InvalidValueError(f"cpu.max should read 'QUOTA PERIOD' or 'max PERIOD', got {text!r}")
    if parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) == 2 else 100_000
    except ValueError:
        raise InvalidValueError(
            f"cpu.max should read 'QUOTA PERIOD' with integer microseconds, got {text!r}"
        ) from None
    if quota <= 0 or period <= 0:
        raise InvalidValueError(f"cpu.max holds a non-positive quota or period: {text!r}")
    return quota / period


def _parse_cfs(quota_text: str, period_text: str) -> float | None:
    """Parse cgroup v1 ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` into cores (None: no cap)."""
    quota = int(quota_text.strip())
    period = int(period_text.strip())
    if quota <= 0 or period <= 0:  # -1 means "no limit"
        return None
    return quota / period


@dataclass(frozen=True)
class _Mount:
    mount_point: str  # where the hierarchy is mounted, e.g. /sys/fs/cgroup/cpu
    root: str  # path of the hierarchy that is mounted there, e.g. /
    version: int  # 1 or 2
    controllers: frozenset[str]  # v1 only: cpu, cpuacct, ...


def _parse_mountinfo(text: str) -> list[_Mount]:
    """Cgroup mounts from ``/proc/<pid>/mountinfo`` text (see proc(5))."""
    mounts: list[_Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        tail = right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        fstype, super_options = tail[0], tail[2]
        if fstype == "cgroup2":
            mounts.append(_Mount(fields[4], fields[3], 2, frozenset()))
        elif fstype == "cgroup":
            mounts.append(_Mount(fields[4], fields[3], 1, frozenset(super_options.split(","))))
    return mounts


def _parse_proc_cgroup(text: str) -> tuple[str | None, dict[str, str]]:
    """``/proc/<pid>/cgroup`` -> (v2 path or None, {v1 controller: path})."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        else:
            for name in controllers.split(","):
                if name:
                    v1[name] = path
    return v2, v1


def _dirs_up(mount: _Mount, cg_path: str, fs_prefix: str) -> list[Path]:
    """Directories from the process's cgroup up to the mount point (innermost first)."""
    base = Path(fs_prefix + mount.mount_point)
    rel = cg_path
    root = mount.root.rstrip("/")
    if root and rel.startswith(root):
        rel = rel[len(root) :]
    rel = rel.strip("/")
    dirs: list[Path] = []
    current = base / rel if rel else base
    if not current.is_dir():
        # The path is not visible from here (another cgroup namespace): the
        # mount point itself is the process's own cgroup in that case.
        current = base
    while True:
        dirs.append(current)
        if current == base or base not in current.parents:
            break
        current = current.parent
    return dirs


def cgroup_quota_cores(
    cgroup_text: str, mountinfo_text: str, fs_prefix: str = ""
) -> tuple[float | None, str | None]:
    """CPU quota in cores for a process with the given ``/proc/<pid>/cgroup`` text.

    Checks every level from the process's cgroup up to the hierarchy root and
    keeps the tightest limit (a parent's quota binds its children). Returns
    ``(cores, file that set it)``, or ``(None, None)`` when nothing limits the
    process or nothing can be read. ``fs_prefix`` is prepended to mount points
    (tests point it at a directory tree shaped like ``/sys/fs/cgroup``).
    """
    v2_path, v1_paths = _parse_proc_cgroup(cgroup_text)
    best: float | None = None
    source: str | None = None

    def consider(value: float | None, where: Path) -> None:
        nonlocal best, source
        if value is not None and (best is None or value < best):
            best, source = value, str(where)

    for mount in _parse_mountinfo(mountinfo_text):
        if mount.version == 2 and v2_path is not None:
            for directory in _dirs_up(mount, v2_path, fs_prefix):
                try:
                    consider(parse_cpu_max((directory / "cpu.max").read_text()), directory)
                except (OSError, ValueError):
                    continue
        elif mount.version == 1 and "cpu" in mount.controllers and "cpu" in v1_paths:
            for directory in _dirs_up(mount, v1_paths["cpu"], fs_prefix):
                try:
                    value = _parse_cfs(
                        (directory / "cpu.cfs_quota_us").read_text(),
                        (directory / "cpu.cfs_period_us").read_text(),
                    )
                except (OSError, ValueError):
                    continue
                consider(value, directory)
    return best, source


def cpu_limits(pid: int) -> CpuLimits:
    """CPU affinity and cgroup quota of process ``pid``; raises ``psutil.NoSuchProcess`` if gone."""
    cpu_count = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    proc = psutil.Process(pid)
    try:
        affinity = len(proc.cpu_affinity() or []) or cpu_count
    except (AttributeError, psutil.AccessDenied, NotImplementedError, OSError):
        affinity = cpu_count
    quota: float | None = None
    quota_source: str | None = None
    try:  # by hand: psutil has no cgroups
        cgroup_text = Path(f"/proc/{pid}/cgroup").read_text()
        mountinfo_text = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        pass
    else:
        quota, quota_source = cgroup_quota_cores(cgroup_text, mountinfo_text)
    cores = float(affinity) if quota is None else min(float(affinity), quota)
    return CpuLimits(
        cores_available=cores,
        affinity=affinity,
        quota_cores=quota,
        cpu_count=cpu_count,
        quota_source=quota_source,
    )
