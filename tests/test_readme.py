"""The README is for users: short, and every command it shows is one the CLI takes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from gyreprof.cli import _ORDER, build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def _shell_lines() -> list[str]:
    """The command lines of the README's bash blocks (continuations joined, comments and
    a leading ``cd DIR &&`` dropped) that run ``gyreprof``."""
    text = README.read_text()
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("  #")[0].strip()
            line = re.sub(r"^cd \S+ && ", "", line)
            if line.startswith("gyreprof "):
                lines.append(line)
    return lines


def test_readme_is_at_most_300_lines() -> None:
    assert len(README.read_text().splitlines()) <= 300


def test_every_readme_command_line_parses() -> None:
    """Each ``gyreprof ...`` line of a bash block is accepted by the real parser: an option
    renamed or dropped in the CLI fails here before a user copies the line."""
    lines = _shell_lines()
    assert len(lines) >= 15, lines
    parser = build_parser()
    for line in lines:
        argv = shlex.split(line)[1:]
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse's way of refusing a command line
            pytest.fail(f"the README's {line!r} does not parse (exit {exc.code})")
        assert args.func.__module__ == f"gyreprof.commands.{argv[0]}", line


def test_every_command_has_a_readme_section() -> None:
    text = README.read_text()
    for name in _ORDER:
        assert f"`gyreprof {name}`" in text, name


def test_a_misspelt_option_is_refused() -> None:
    """The check above can fail: the parser refuses an option the CLI does not have."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--stack-hz", "50", "--", "python", "x.py"])
