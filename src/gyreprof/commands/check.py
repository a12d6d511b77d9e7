"""``gyreprof check PID --expect ROLE=N``: did the configured parallelism take effect?"""

from __future__ import annotations

import argparse
import json
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text
from gyreprof.commands import _args


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value.strip()


def _expect_arg(text: str) -> tuple[str, int]:
    role, value = _key_value(text)
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=COUNT with an integer count, got {text!r} (e.g. env_worker=8)"
        ) from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"a process count cannot be negative: {text!r}")
    return role, count


def _config_value(text: str) -> Any:
    """``1`` -> 1, ``true`` -> True, ``cuda`` -> "cuda" (JSON where it parses, else the text)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="did the configured parallelism take effect (worker counts, config, oversubscription)",
        description=(
            "Compare the process tree under PID with what was configured: the number of "
            "processes per worker role (--expect), the config each worker registered "
            "(--config, also thread variables such as OMP_NUM_THREADS), workers that use "
            "no CPU, and the threads that really ran: each thread's CPU time (and time "
            "waiting for a CPU) is read twice, --sample seconds apart, and the threads busy "
            "at least half of that time are counted against the cores the job may use (CPU "
            "affinity and cgroup quota). A thread pool that never ran (BLAS/OpenMP threads "
            "of a worker that does no matmul) is mentioned, not counted; gyreprof's own "
            "threads (under gyreprof run) are never counted. Workers report their role and "
            "config with gyreprof.register_worker(role, num_threads=N, key=value, ...); "
            "an env built in the main process (the one AsyncVectorEnv builds to read the "
            "spaces, or all of a SyncVectorEnv's: 'main process, envs inline') is counted "
            "apart from the worker processes. "
            "Exit code 0 when the parallelism took effect (the expected workers run, with "
            "the intended config), even with warnings (oversubscription, more busy threads "
            "than declared), which are printed beside it; 1 when it did not; 2 for bad "
            "input or a PID that does not exist."
        ),
    )
    parser.add_argument("pid", type=_args.pid, metavar="PID", help="root of the process tree")
    parser.add_argument(
        "--expect",
        type=_expect_arg,
        action="append",
        default=[],
        metavar="ROLE=N",
        help="expect N processes registered with ROLE (repeatable), e.g. env_worker=8",
    )
    parser.add_argument(
        "--config",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="intended config value each worker should have read (repeatable), "
        "e.g. num_threads=1 or OMP_NUM_THREADS=1",
    )
    parser.add_argument(
        "--sample",
        type=_args.seconds(allow_zero=True),
        default=1.0,
        metavar="S",
        help="observe the threads' CPU use for S seconds (default 1); 0: each thread's "
        "lifetime totals, at once, and no check for workers that use no CPU",
    )
    parser.add_argument(
        "--max-threads-per-core",
        type=float,
        default=1.0,
        metavar="F",
        help="threads per available core tolerated before calling it oversubscribed (default 1)",
    )
    parser.add_argument(
        "--registry",
        metavar="DIR",
        default=None,
        help="worker registry directory (default: $GYREPROF_REGISTRY_DIR or a per-user temp dir)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gyreprof.analysis.parallelism import check_parallelism

    expected: dict[str, int] = {}
    for role, count in args.expect:
        if role in expected and expected[role] != count:
            raise UsageError(f"--expect {role} given twice ({expected[role]} and {count})")
        expected[role] = count
    config = {key: _config_value(value) for key, value in args.config}
    if not args.max_threads_per_core > 0:
        raise UsageError(f"--max-threads-per-core must be > 0, got {args.max_threads_per_core}")
    try:
        report = check_parallelism(
            args.pid,
            expected=expected,
            config=config,
            sample_s=args.sample,
            max_threads_per_core=args.max_threads_per_core,
            registry=args.registry,
        )
    except ProcessLookupError as exc:
        raise UsageError(str(exc)) from None
    print(report.to_json(indent=2) if args.json else safe_text(report))
    return report.exit_code
