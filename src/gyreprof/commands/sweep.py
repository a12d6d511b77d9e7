"""``gyreprof sweep module:factory --param P --values ...``: a controlled one-variable sweep.

``gyreprof sweep [options] -- COMMAND`` sweeps an unmodified script instead: the one
``{v1,v2,...}`` brace list in COMMAND (or in an ``--env NAME={...}``) gives the values,
and each runs under ``gyreprof run``'s launcher (:mod:`gyreprof.commands._sweep_script`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from gyreprof._support.errors import UsageError
from gyreprof._support.format import safe_text
from gyreprof.commands import _args
from gyreprof.render import json as render_json


def values_arg(text: str) -> list[int | float]:
    """argparse type: '8,16,32,64' -> [8, 16, 32, 64] (ints where every item is one)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected comma-separated numbers such as 8,16,32,64")
    out: list[int | float] = []
    for t in items:
        try:
            out.append(int(t))
        except ValueError:
            try:
                f = float(t)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{t!r} is not a number; expected comma-separated numbers such as 8,16,32"
                ) from None
            if not math.isfinite(f):
                raise argparse.ArgumentTypeError(f"{t!r} is not a finite number") from None
            out.append(f)
    return out


def _literal(text: str) -> Any:
    """A --fixed value: JSON (8, 0.5, true, null, [1,2], "x"), Python's True/False/None,
    else the text itself."""
    low = {"True": True, "False": False, "None": None}
    if text in low:
        return low[text]
    try:
        return json.loads(text)
    except ValueError:
        return text


def fixed_arg(text: str) -> tuple[str, Any]:
    """argparse type: 'name=value' -> (name, parsed value)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(
            f"--fixed takes NAME=VALUE with a keyword name, e.g. num_envs=8, got {text!r}"
        )
    return name, _literal(value.strip())


def fraction_arg(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a fraction such as 0.05 or 5%, got {text!r}"
        ) from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a fraction in [0, 1) such as 0.05, got {text!r}"
        )
    return v


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        usage="gyreprof sweep FACTORY --param P --values V1,V2,... [options]\n"
        "       gyreprof sweep [--env NAME=VALUE] [--max-s S] [--max-steps N] [options] -- "
        "COMMAND ... {V1,V2,...} ...",
        help="controlled batch-size (or any one-setting) sweep: throughput, phases, peak memory",
        description=(
            "Build the sampler with FACTORY(**fixed, PARAM=value) for each value, in a fresh "
            "process per run, and measure samples/s from time inside the sampler calls, "
            "per-call p50/p99, the per-phase breakdown (factories that take prof=) and peak "
            "memory; stop when throughput goes flat while memory keeps rising, or at "
            "--memory-limit (peak RSS of the whole sampler: the measuring process plus its "
            "worker processes). The recommendation is the smallest value whose throughput "
            "is not distinguishable from the best (the report states the test). FACTORY "
            "returns an object with .sample() (or a callable) that makes one sampling call "
            "and returns how many samples it produced: an int, or the batch (read as "
            "gyreprof selfcheck reads it). With -- COMMAND instead of FACTORY, sweep an "
            "unmodified script: COMMAND holds one brace list {V1,V2,...} (quote it in bash "
            "and zsh) in one argument, or --env NAME={V1,V2,...} sets an environment "
            "variable; each value runs COMMAND under gyreprof run's launcher for at most "
            "--max-s seconds (or --max-steps trainer steps; SIGINT, then SIGTERM) and is "
            "judged by env steps per second of the sampler's time, its phases, the peak RSS "
            "of its process tree and the run's verdict. Exit code 0 when at least one value "
            "was measured, 1 when none was, 2 for bad input."
        ),
        epilog=(
            "examples: gyreprof sweep mypkg.rollout:make_sampler --param batch_size "
            "--values 8,16,32,64 --fixed num_envs=8 --steps 200 --warmup 20 --repeats 3 "
            "--json out.json --plot out.png; "
            "gyreprof sweep --max-s 20 -- python ppo.py --num-envs '{1,2,4,8}'"
        ),
    )
    parser.add_argument(
        "target",
        nargs=argparse.REMAINDER,
        metavar="FACTORY | -- COMMAND",
        help="the sampler factory as package.module:name, or -- and the command to sweep",
    )
    parser.add_argument("--param", default=None, help="the one keyword that changes")
    parser.add_argument(
        "--values",
        default=None,
        type=values_arg,
        metavar="V1,V2,...",
        help="values to try, ascending, comma-separated",
    )
    parser.add_argument(
        "--fixed",
        action="append",
        type=fixed_arg,
        default=[],
        metavar="NAME=VALUE",
        help='a setting kept constant (repeatable); VALUE is JSON (8, 0.5, true, "x") or text',
    )
    parser.add_argument(
        "--steps",
        type=_args.count(1),
        default=None,
        help=f"measured sampler calls per run (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--warmup",
        type=_args.count(0),
        default=None,
        help=f"warm-up calls per run, excluded and reported apart (default {DEFAULT_WARMUP})",
    )
    parser.add_argument(
        "--repeats",
        type=_args.count(1),
        default=3,
        help="runs per value; figures are median and min-max (default 3)",
    )
    parser.add_argument(
        "--phases",
        default=None,
        metavar="A,B",
        help="phase names the sampler records, if FACTORY.phases is not set",
    )
    parser.add_argument(
        "--memory-limit",
        default=None,
        metavar="SIZE",
        help="stop once a run's peak RSS, worker processes included, exceeds SIZE "
        "(e.g. 8GiB, 1500MB)",
    )
    parser.add_argument(
        "--flat-within",
        type=fraction_arg,
        default=0.05,
        metavar="F",
        help="throughput gain below which growing stops paying (default 0.05)",
    )
    parser.add_argument(
        "--timeout",
        type=_args.seconds(),
        default=None,
        metavar="S",
        help="seconds each run may take before it is killed",
    )
    parser.add_argument(
        "--no-isolate",
        action="store_true",
        help="run every value in this process (faster; peaks bleed)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help="write the result as JSON to PATH (no PATH: print JSON instead of the report)",
    )
    parser.add_argument("--csv", default=None, metavar="PATH", help="write one row per value")
    parser.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="write a PNG of throughput and peak memory (needs gyreprof[plot])",
    )
    parser.add_argument(
        "--summaries", action="store_true", help="include every run's gyreprof summary in the JSON"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    script = parser.add_argument_group("sweeping a script (-- COMMAND)")
    script.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for COMMAND (repeatable); NAME={V1,V2,...} sweeps it",
    )
    script.add_argument(
        "--max-s",
        type=_args.seconds(),
        default=None,
        metavar="S",
        help=f"stop each run after S seconds (default {DEFAULT_MAX_S:g}): SIGINT, then "
        "SIGTERM; what it recorded is kept",
    )
    script.add_argument(
        "--max-steps",
        type=_args.count(1),
        default=None,
        metavar="N",
        help="stop each run once its trainer completed N steps (collect-and-update), or at "
        "--max-s, whichever comes first",
    )
    parser.set_defaults(func=run, _parser=parser)


DEFAULT_STEPS = 200
DEFAULT_WARMUP = 20
DEFAULT_MAX_S = 30.0

#: options of the factory sweep alone, and of the script sweep alone (dest, flag)
_FACTORY_ONLY = (
    ("param", "--param"),
    ("values", "--values"),
    ("fixed", "--fixed"),
    ("steps", "--steps"),
    ("warmup", "--warmup"),
    ("phases", "--phases"),
    ("timeout", "--timeout"),
    ("no_isolate", "--no-isolate"),
)
_SCRIPT_ONLY = (("env", "--env"), ("max_s", "--max-s"), ("max_steps", "--max-steps"))


def _given(args: argparse.Namespace, dest: str) -> bool:
    v = getattr(args, dest, None)
    return v not in (None, [], False)


def _split_target(args: argparse.Namespace) -> list[str] | None:
    """The command of a script sweep (after ``--``), or None for a factory sweep, whose
    options after FACTORY are parsed here (the target swallowed them)."""
    target = list(args.target or [])
    if target and target[0] == "--":
        return target[1:]
    if not target:
        raise UsageError(
            "give the sampler factory (gyreprof sweep mypkg.mod:make_sampler --param "
            "batch_size --values 8,16,32) or, after --, the command to sweep (gyreprof sweep "
            "-- python train.py --num-envs '{1,2,4,8}')"
        )
    args.factory = target[0]
    rest = target[1:]
    if rest:
        parser = args._parser
        again = parser.parse_args(rest, namespace=argparse.Namespace(**vars(args)))
        if again.target:
            if again.target[0] == "--":
                raise UsageError(f"give either a FACTORY ({args.factory}) or -- COMMAND, not both")
            raise UsageError(f"unexpected argument {again.target[0]!r} after FACTORY")
        for k, v in vars(again).items():
            setattr(args, k, v)
    args.target = [args.factory]
    return None


def run(args: argparse.Namespace) -> int:

    from gyreprof.analysis.sweep import SweepUsageError, parse_bytes, sweep

    command = _split_target(args)
    if args.plot:
        _args.require_extra("--plot", "matplotlib", "plot")
    memory_limit = None
    if args.memory_limit is not None:
        try:
            memory_limit = parse_bytes(args.memory_limit)
        except ValueError as exc:
            raise UsageError(f"--memory-limit: {exc}") from None
    if command is not None:
        return _run_script(args, command, memory_limit)
    for dest, flag in _SCRIPT_ONLY:
        if _given(args, dest):
            raise UsageError(f"{flag} is for sweeping a script (-- COMMAND), not a factory")
    if args.param is None or args.values is None:
        missing = " and ".join(f for f, v in (("--param", args.param), ("--values", args.values))
                               if v is None)  # fmt: skip
        raise UsageError(
            f"a factory sweep needs {missing}: e.g. gyreprof sweep {args.factory} --param "
            "batch_size --values 8,16,32"
        )
    steps = DEFAULT_STEPS if args.steps is None else args.steps
    warmup = DEFAULT_WARMUP if args.warmup is None else args.warmup
    fixed: dict[str, Any] = {}
    for name, value in args.fixed:
        if name in fixed:
            raise UsageError(f"--fixed {name} given twice")
        fixed[name] = value
    phases = None
    if args.phases is not None:
        phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    # like `python -m`: modules in the current folder are importable
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        result = sweep(
            args.factory,
            args.param,
            args.values,
            fixed=fixed,
            steps=steps,
            warmup=warmup,
            repeats=args.repeats,
            isolate=not args.no_isolate,
            memory_limit=memory_limit,
            flat_within=args.flat_within,
            timeout_s=args.timeout,
            progress=not args.no_progress,
            phases=phases,
        )
    except (SweepUsageError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    return _write(args, result)


def _write(args: argparse.Namespace, result: Any) -> int:
    """Write and print the result as asked; the exit code."""
    to_stdout_json = args.json == "-"
    if args.json and not to_stdout_json:
        render_json.write(result.to_dict(summaries=args.summaries), args.json, indent=2)
    if args.csv:
        result.to_csv(args.csv)
    if args.plot:
        result.to_plot(args.plot)
    if to_stdout_json:
        print(render_json.text(result.to_dict(summaries=args.summaries), indent=2))
    else:
        print(safe_text(result))
    return 0 if result.measured else 1


def _run_script(args: argparse.Namespace, command: list[str], memory_limit: int | None) -> int:
    """``gyreprof sweep [options] -- COMMAND``: the script sweep."""
    from gyreprof.analysis.sweep.script import BraceSweepError, parse_brace_sweep

    for dest, flag in _FACTORY_ONLY:
        if _given(args, dest):
            raise UsageError(
                f"{flag} is for sweeping a factory; a script sweep (-- COMMAND) takes its "
                "values from the one brace list {V1,V2,...} in COMMAND or in an --env"
            )
    try:
        spec = parse_brace_sweep(command, args.env)
    except BraceSweepError as exc:
        raise UsageError(str(exc)) from None
    from gyreprof.commands import run as launcher

    first = launcher._resolve(spec.command(spec.values[0]))
    if isinstance(first, int):  # _resolve said why
        raise UsageError(f"cannot start {command[0]}; nothing was run")
    from gyreprof.commands._sweep_script import sweep_script

    result = sweep_script(
        spec,
        max_s=DEFAULT_MAX_S if args.max_s is None else args.max_s,
        max_steps=args.max_steps,
        repeats=args.repeats,
        flat_within=args.flat_within,
        memory_limit=memory_limit,
        progress=not args.no_progress,
    )
    return _write(args, result)
