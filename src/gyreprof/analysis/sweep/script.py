"""The sweep of an unmodified script: its brace list, and the flag a sweep would change.

``gyreprof sweep -- python train.py --num-envs '{1,2,4,8}'`` runs the command once per
value of its one *brace list*: a ``{v1,v2,...}`` of numbers in one argument (alone, or
inside it: ``--num-envs={1,2,4}``, ``env.n={1,2}``) or in one environment setting
(``gyreprof sweep --env NUM_ENVS={1,2,4} -- python train.py``). :func:`parse_brace_sweep`
finds it and :class:`ScriptSweep` writes the command and environment of each value.

Quote the brace list in bash and zsh (``'{1,2,4,8}'``): unquoted, the shell expands it
into one word per value before gyreprof sees it (:func:`shell_expanded_hint` recognises
the result and says so).

:func:`sweep_command` is the other direction: given the command line of a run, it finds
a flag that sets a sweepable setting (``--num-envs 4``, ``--batch-size=64``, ...) and
returns the ``gyreprof sweep -- ...`` command that sweeps it around its current value
(4 -> ``{2,4,8,16}``), or None when no such flag is visible.

Standard library only: the verdict's advice calls :func:`sweep_command`, and the
launcher's command line parses with :func:`parse_brace_sweep` before anything is loaded.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gyreprof._support.errors import InvalidValueError

__all__ = [
    "SWEEPABLE",
    "BraceSweepError",
    "ScriptSweep",
    "SweepableFlag",
    "find_sweepable_flag",
    "parse_brace_sweep",
    "shell_expanded_hint",
    "sweep_command",
    "sweep_values_around",
]

#: a brace list: ``{`` numbers or words separated by commas ``}`` (``{}`` included, so it
#: can be refused by name); a Python dict or set literal in ``-c`` code does not match
_BRACE = re.compile(r"\{([\w.+\- ]*(?:,[\w.+\- ]*)*)\}")

#: settings whose flag a sweep changes, as the normalised flag name (lower case, ``-`` as
#: ``_``, no leading dashes): the vector env's width, the rollout length, the batch sizes,
#: the sampler's workers
SWEEPABLE: tuple[str, ...] = (
    "num_envs",
    "n_envs",
    "num_env",
    "envs",
    "num_steps",
    "n_steps",
    "rollout_length",
    "batch_size",
    "minibatch_size",
    "mini_batch_size",
    "num_minibatches",
    "train_batch_size",
    "rollout_batch_size",
    "num_workers",
    "n_workers",
    "num_env_runners",
    "num_rollout_workers",
    "num_envs_per_worker",
)


class BraceSweepError(ValueError):
    """The command of a script sweep has no brace list, more than one, or a bad one."""


@dataclass(frozen=True)
class ScriptSweep:
    """A command with one brace list, and how each value's command is written.

    ``where`` is ``"argv"`` (the list is in ``argv[index]``) or ``"env"`` (in the
    environment setting ``env[index]``, a ``NAME=VALUE``); ``start``/``end`` its span
    in that text. ``tokens`` are the values as written (the command gets them so),
    ``values`` the numbers. ``param`` names the setting in the report: the flag
    (``--num-envs``), the environment variable, or the text before ``=``."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    where: str
    index: int
    start: int
    end: int
    tokens: tuple[str, ...]
    values: tuple[int | float, ...]
    param: str

    def _put(self, text: str, token: str) -> str:
        return text[: self.start] + token + text[self.end :]

    def _token(self, value: int | float) -> str:
        return self.tokens[self.values.index(value)]

    def command(self, value: int | float) -> list[str]:
        """The command line of the run with ``value``."""
        out = list(self.argv)
        if self.where == "argv":
            out[self.index] = self._put(out[self.index], self._token(value))
        return out

    def environment(self, value: int | float) -> dict[str, str]:
        """The environment settings of the run with ``value`` (NAME -> VALUE)."""
        out = {}
        for i, (name, text) in enumerate(self.env):
            if self.where == "env" and i == self.index:
                text = self._put(text, self._token(value))
            out[name] = text
        return out

    def template(self) -> str:
        """The sweep as one line, brace list included: ``NAME=... python train.py ...``."""
        env = [f"{n}={v}" for n, v in self.env]
        return shlex.join([*env, *self.argv])


def _number(token: str) -> int | float | None:
    t = token.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        f = float(t)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _param_name(argv: Sequence[str], index: int, start: int) -> str:
    """The setting the brace list in ``argv[index]`` sets: ``--flag={..}`` and
    ``key={..}`` name themselves; ``--flag {..}`` takes the flag before it."""
    text = argv[index]
    head = text[:start]
    if head.endswith("="):
        return head[:-1] or f"argument {index}"
    if head:
        return f"argument {index} ({text})"
    if index > 0 and argv[index - 1].startswith("-") and _number(argv[index - 1]) is None:
        return argv[index - 1]
    return f"argument {index}"


def _values(tokens: Sequence[str], where: str) -> tuple[int | float, ...]:
    if not tokens or tokens == [""]:
        raise BraceSweepError(
            f"the brace list in {where} is empty: give the values to try, e.g. {{1,2,4,8}}"
        )
    out: list[int | float] = []
    for t in tokens:
        n = _number(t)
        if n is None:
            raise BraceSweepError(
                f"{t.strip()!r} in the brace list of {where} is not a number; a sweep tries "
                "numbers, e.g. {1,2,4,8}"
            )
        out.append(n)
    for a, b in zip(out, out[1:]):  # noqa: B905 - py3.10 target
        if b == a:
            raise BraceSweepError(f"{a!r} appears twice in the brace list of {where}")
        if b < a:
            raise BraceSweepError(
                f"the brace list of {where} must be ascending (the sweep grows the value and "
                f"stops when it stops paying off), but {b!r} comes after {a!r}; use "
                "{"
                + ",".join(tokens[i] for i in sorted(range(len(out)), key=out.__getitem__))
                + "}"
            )
    return tuple(out)


def parse_brace_sweep(argv: Sequence[str], env: Sequence[str] = ()) -> ScriptSweep:
    """The one brace list of ``argv`` (the command) and ``env`` (``NAME=VALUE`` settings).

    BraceSweepError (a ValueError) when there is none, more than one, an empty one, a
    value that is not a number, or values that are not ascending."""
    argv = [str(a) for a in argv]
    if not argv:
        raise BraceSweepError(
            "give the command to sweep after --, e.g. gyreprof sweep -- python train.py "
            "--num-envs '{1,2,4,8}'"
        )
    pairs: list[tuple[str, str]] = []
    for item in env:
        name, sep, value = str(item).partition("=")
        if not sep or not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise BraceSweepError(
                f"--env takes NAME=VALUE (an environment variable's name), got {item!r}"
            )
        pairs.append((name, value))
    found: list[tuple[str, int, re.Match[str]]] = []
    for i, a in enumerate(argv):
        found += [("argv", i, m) for m in _BRACE.finditer(a)]
    for i, (_, v) in enumerate(pairs):
        found += [("env", i, m) for m in _BRACE.finditer(v)]
    if not found:
        hint = shell_expanded_hint(argv)
        raise BraceSweepError(
            "no brace list to sweep: write the values of the one setting that changes as "
            "{v1,v2,...} in the command (--num-envs '{1,2,4,8}') or in an --env "
            "NAME='{1,2,4}'" + (f"; {hint}" if hint else "")
        )
    if len(found) > 1:
        shown = ", ".join(m.group(0) for _, _, m in found[:4])
        raise BraceSweepError(
            f"{len(found)} brace lists ({shown}): a sweep changes exactly one setting, so give "
            "one brace list and write the other settings as single values"
        )
    where, index, m = found[0]
    tokens = m.group(1).split(",")
    if where == "argv":
        param = _param_name(argv, index, m.start())
        what = f"argument {argv[index]!r}"
    else:
        param = pairs[index][0]
        what = f"--env {param}"
    values = _values(tokens, what)
    return ScriptSweep(
        argv=tuple(argv),
        env=tuple(pairs),
        where=where,
        index=index,
        start=m.start(),
        end=m.end(),
        tokens=tuple(t.strip() for t in tokens),
        values=values,
        param=param,
    )


def shell_expanded_hint(argv: Sequence[str]) -> str | None:
    """Words for a command a shell's brace expansion already split: the same
    ``--flag=N`` given with several numbers, or a flag followed by several numbers."""
    seen: dict[str, int] = {}
    for a in argv:
        flag, sep, value = a.partition("=")
        if sep and flag.startswith("--") and _number(value) is not None:
            seen[flag] = seen.get(flag, 0) + 1
    repeated = [f for f, n in seen.items() if n > 1]
    if not repeated:
        for i, a in enumerate(argv):
            if a.startswith("--") and "=" not in a:
                run = 0
                for b in argv[i + 1 :]:
                    if _number(b) is None:
                        break
                    run += 1
                if run > 1:
                    repeated.append(a)
                    break
    if not repeated:
        return None
    return (
        f"{repeated[0]} is given several numbers: did the shell expand an unquoted brace "
        "list? quote it, e.g. --num-envs '{1,2,4,8}'"
    )


# ------------------------------------------------------------------ the flag finder


@dataclass(frozen=True)
class SweepableFlag:
    """A flag of a command line that sets a sweepable setting: ``argv[value_index]``
    holds its value (``joined``: written ``--flag=VALUE`` in that one argument)."""

    flag: str
    setting: str
    value: int
    flag_index: int
    value_index: int
    joined: bool


def _normal(flag: str) -> str:
    return flag.lstrip("-").lower().replace("-", "_")


def _int_value(text: str) -> int | None:
    t = text.strip()
    if not re.fullmatch(r"[0-9]+", t):
        return None
    n = int(t)
    return n if n > 0 else None


def _command_part(argv: Sequence[str]) -> int:
    """Where the user's command starts: after ``gyreprof run [...] --`` when the line
    is a launcher's, else 0."""
    if argv and re.search(r"(^|/)gyreprof$", argv[0]) and "--" in argv:
        return list(argv).index("--") + 1
    if len(argv) > 2 and argv[1:3] == ["-m", "gyreprof"] and "--" in argv:
        return list(argv).index("--") + 1
    return 0


def find_sweepable_flag(
    argv: Sequence[str], settings: Sequence[str] = SWEEPABLE
) -> SweepableFlag | None:
    """The first flag of ``argv`` that sets one of ``settings`` to a positive whole
    number: ``--num-envs 4``, ``--num-envs=4``, ``--num_envs 4`` (names compare with
    ``-`` and ``_`` alike, case aside). A flag whose name only starts like one
    (``--num-envs-extra``), a value that is not a whole number (``--num-envs auto``) and
    anything after a bare ``--`` of the command are skipped. None when there is none."""
    argv = [str(a) for a in argv]
    wanted = {_normal(s) for s in settings}
    i = _command_part(argv)
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return None  # the rest are the command's positional arguments
        if a.startswith("-") and len(a) > 1 and _number(a) is None:
            flag, sep, value = a.partition("=")
            name = _normal(flag)
            if name in wanted:
                if sep:
                    n = _int_value(value)
                    if n is not None:
                        return SweepableFlag(flag, name, n, i, i, True)
                elif i + 1 < len(argv):
                    n = _int_value(argv[i + 1])
                    if n is not None:
                        return SweepableFlag(flag, name, n, i, i + 1, False)
                    i += 1  # its value, not a flag
        i += 1
    return None


def sweep_values_around(current: int) -> tuple[int, ...]:
    """Values a sweep tries around ``current``: half, itself, twice and four times
    (4 -> 2, 4, 8, 16); from 1 upwards when half is below 1 (1 -> 1, 2, 4, 8)."""
    if current < 1:
        raise InvalidValueError(f"a sweepable setting is a positive whole number, got {current!r}")
    low = max(1, current // 2)
    if low == current:
        return (current, 2 * current, 4 * current, 8 * current)
    return (low, current, 2 * current, 4 * current)


def sweep_command(
    argv: Sequence[str],
    settings: Sequence[str] = SWEEPABLE,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The ``gyreprof sweep -- ...`` command that sweeps the first sweepable flag of
    ``argv`` (see :func:`find_sweepable_flag`) around its current value, the brace list
    quoted for the shell; None when no such flag is visible.

    ``sweep_command(["python", "ppo.py", "--num-envs", "4"])`` ->
    ``"gyreprof sweep -- python ppo.py --num-envs '{2,4,8,16}'"``. ``env``: settings to
    keep, written as ``--env NAME=VALUE`` options."""
    argv = [str(a) for a in argv]
    found = find_sweepable_flag(argv, settings)
    if found is None:
        return None
    start = _command_part(argv)
    out = list(argv)
    braces = "{" + ",".join(str(v) for v in sweep_values_around(found.value)) + "}"
    if found.joined:
        out[found.value_index] = f"{found.flag}={braces}"
    else:
        out[found.value_index] = braces
    options = [f"--env {shlex.quote(f'{k}={v}')}" for k, v in (env or {}).items()]
    return " ".join(["gyreprof sweep", *options, "--", shlex.join(out[start:])])
