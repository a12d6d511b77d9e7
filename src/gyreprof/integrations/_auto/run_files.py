"""The names of the files the processes of a ``gyreprof run`` leave in the run directory
(what they hold: ``records``), the phases of each side, and the environment that tells a
process it is part of a run.

Apart from ``records`` so that the launcher can find a run folder empty without loading
the record types (dataclasses and their serialiser); ``records`` re-exports every name
here.
"""

from __future__ import annotations

from pathlib import Path

SAMPLER_PHASES = ("env_step", "env_reset", "step_async", "step_wait", "fwd", "generate")
TRAINER_PHASES: tuple[str, ...] = ("wait", "compute")

ENV_RUN_DIR = "GYREPROF_RUN_DIR"
ENV_RUN_ID = "GYREPROF_RUN_ID"
ENV_MAIN_PID = "GYREPROF_RUN_MAIN_PID"
ENV_PATH = "GYREPROF_RUN_PATH"


def group_path(run_dir: Path, n: int) -> Path:
    return run_dir / f"group-{n}.json"


def group_snap_path(run_dir: Path, n: int) -> Path:
    return run_dir / f"group-{n}.sampler.snap"


def group_numbers(run_dir: Path) -> list[int]:
    """The numbers of the groups whose records ``run_dir`` holds, in order."""
    out = []
    for p in run_dir.glob("group-*.json"):
        head = p.name[len("group-") : -len(".json")]
        if head.isascii() and head.isdigit():
            out.append(int(head))
    return sorted(out)


def start_path(run_dir: Path, pid: int | str) -> Path:
    return run_dir / f"{pid}.start.json"


def done_path(run_dir: Path, pid: int | str) -> Path:
    return run_dir / f"{pid}.done.json"


def snap_path(run_dir: Path, pid: int | str, side: str) -> Path:
    return run_dir / f"{pid}.{side}.snap"


def exec_key(pid: int, seq: int = 0) -> str:
    """The record name of a process image replaced by ``exec`` (the new image keeps the pid's
    own name): ``<pid>-x<seq, 6 digits><random hex>``, ``seq`` the image's place among the
    pid's images replaced before it (so the names sort in the order the images ran)."""
    import secrets

    return f"{pid}-x{seq:06d}{secrets.token_hex(6)}"


def parse_exec_key(key: str) -> int | None:
    """The pid in an :func:`exec_key`, or None."""
    head, sep, tail = key.partition("-x")
    if not sep or not (head.isascii() and head.isdigit()) or not tail.isalnum():
        return None
    return int(head)


def segment_name(run_id: str, side: str) -> str:
    """Name of a live segment of this run (``side``: sampler or trainer)."""
    return f"gyreprof-run-{run_id}:{side}"


def rollouts_path(run_dir: Path, pid: int | str) -> Path:
    """The process's HTTP rollout requests (``rollout_record``), written at exit."""
    return run_dir / f"{pid}.rollouts.json"


def sites_path(run_dir: Path, pid: int | str) -> Path:
    """The process's stack-sampled code sites (``stacks``), written at exit."""
    return run_dir / f"{pid}.sites.json"
