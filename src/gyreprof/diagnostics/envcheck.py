"""Does the environment match what the project declares?  ``gyreprof envcheck [FILE...]``.

``envcheck(paths)`` reads declared requirements from

- ``requirements*.txt`` files (comments, line continuations, ``-r``/``-c`` includes,
  environment markers, extras, ``${VAR}`` expansion, per-line ``--hash`` options),
- ``pyproject.toml`` ``[project].dependencies`` (and ``[project.optional-dependencies]``
  groups when asked for; a group that names the project itself, such as
  ``all = ["pkg[gym,plot]"]``, is expanded),
- a conda ``environment.yml``: its ``pip:`` section, plus a ``python`` version pin
  checked against the running interpreter (other conda packages are counted, not
  checked),

and compares them with what is installed (``importlib.metadata``; ``packaging`` for
names, specifiers and markers): a package missing, a version outside its specifier,
requested extras whose own requirements are not installed, and names that differ
from the installed distribution's only by normalisation (``scikit_learn`` vs
``scikit-learn``: a note, not a failure).  It also lists broken requirements among
the installed distributions themselves (what ``pip check`` reports).  Pinned
requirements (``==``) are listed first.

Exit codes (``EnvReport.exit_code`` and ``gyreprof envcheck``): 0 everything
matches, 1 a mismatch (missing, wrong version, missing extras, broken installed
requirements), 2 a declaration could not be read (malformed line, unreadable
file: reported with ``file:line``).

Reads TOML with ``tomllib`` (Python 3.11+) or ``tomli``, YAML with PyYAML's safe
loader and requirements with ``packaging``: the ``envcheck`` extra
(``pip install "gyreprof[envcheck]"``). Without them, :func:`envcheck` raises an
``ImportError`` naming what is missing and that command before it reads anything.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from gyreprof._support import io as _io
from gyreprof._support.checks import json_depth
from gyreprof._support.errors import ArgumentTypeError, CorruptDataError, InvalidValueError
from gyreprof.model._serial import decode, encode, serial_format

try:
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - reported by _require_extras before any work
    pass

INSTALL_HINT = 'pip install "gyreprof[envcheck]"'

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_DECLARATION = 2

#: Bounds on what a declaration file may ask of the reader (a YAML alias bomb, nesting
#: that would exhaust the interpreter's stack, an endless chain of ``-r`` includes)
MAX_NESTING = 64  # levels of lists / tables in a YAML or TOML file
MAX_YAML_NODES = 100_000  # YAML nodes after alias expansion (an alias counts its target)
MAX_INCLUDE_DEPTH = 50  # ``-r``/``-c`` files included one inside another


class DeclarationTooComplexError(CorruptDataError):
    """A declaration file beyond the bounds above (a ValueError): reported as an error
    line naming the file and what was too much, never expanded or recursed into."""


STATUS_OK = "ok"
STATUS_MISSING = "missing"
STATUS_VERSION = "wrong-version"
STATUS_EXTRAS = "missing-extras"
STATUS_SKIPPED = "skipped"  # environment marker does not apply here
STATUS_UNCHECKED = "unchecked"  # a URL / path / editable without a name
_FAILING = frozenset({STATUS_MISSING, STATUS_VERSION, STATUS_EXTRAS})

# pip options that do not declare packages and may appear in requirement files
_IGNORED_OPTIONS = frozenset(
    {
        "-i",
        "--index-url",
        "--extra-index-url",
        "--no-index",
        "-f",
        "--find-links",
        "--pre",
        "--prefer-binary",
        "--only-binary",
        "--no-binary",
        "--require-hashes",
        "--trusted-host",
        "--use-feature",
        "--config-settings",
        "--global-option",
        "--hash",
    }
)
_PER_REQUIREMENT_OPTION = re.compile(r"\s+--(hash|config-settings|global-option)[= ]\S+")
_COMMENT = re.compile(r"(^|\s+)#.*$")
_ENV_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_EGG = re.compile(r"#egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_ARCHIVE = (".whl", ".tar.gz", ".tar.bz2", ".tar.xz", ".zip", ".tgz")


# ---------------------------------------------------------------------------- results
ENVCHECK_FORMAT = "gyreprof.envcheck/1"


@dataclass(frozen=True)
class RequirementCheck:
    """One declared requirement compared with the installed distribution."""

    name: str  # as declared
    declared: str  # the requirement text
    source: str  # "file:line"
    status: str  # ok, missing, wrong-version, missing-extras, skipped, unchecked
    pinned: bool
    installed_name: str | None = None
    installed_version: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing_extras: list[str] = field(default_factory=list)
    constraint: bool = False  # from a -c file: checked only when installed

    @property
    def ok(self) -> bool:
        return self.status not in _FAILING


@dataclass(frozen=True)
class DeclarationError:
    """A declaration that could not be read: where, the text, and why."""

    source: str  # "file:line" (or just "file")
    text: str
    message: str

    def __str__(self) -> str:
        shown = f" {self.text!r}" if self.text else ""
        return f"{self.source}:{shown} {self.message}"


@dataclass(frozen=True)
class BrokenRequirement:
    """An installed distribution whose own requirement is not satisfied (like ``pip check``)."""

    package: str
    version: str
    requirement: str
    installed_version: str | None  # None: the requirement is not installed at all

    def __str__(self) -> str:
        if self.installed_version is None:
            return f"{self.package} {self.version} requires {self.requirement}, not installed"
        return (
            f"{self.package} {self.version} requires {self.requirement}, "
            f"but {self.installed_version} is installed"
        )


@serial_format(ENVCHECK_FORMAT, derived=("ok", "exit_code"))
@dataclass
class EnvReport:
    """The result of :func:`envcheck`: ``checks`` (pinned first), ``broken``, ``errors``."""

    files: list[str]
    checks: list[RequirementCheck]
    broken: list[BrokenRequirement]
    errors: list[DeclarationError]
    notes: list[str]

    @property
    def mismatches(self) -> list[RequirementCheck]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.broken and not self.errors

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_BAD_DECLARATION
        if self.mismatches or self.broken:
            return EXIT_MISMATCH
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, format ``gyreprof.envcheck/1``, with ``ok`` and ``exit_code``."""
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvReport:
        """The report again from :meth:`to_dict`; ``CorruptDataError`` naming what is wrong."""
        return decode(cls, data)

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, indent: int | None = None
    ) -> str:
        """Strict JSON text of :meth:`to_dict`; written to ``path`` as well (atomically)
        when given."""
        from gyreprof.render import json as render_json

        return render_json.write(self.to_dict(), path, indent=indent)

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing declared"
        lines = [
            f"envcheck: {len(self.checks)} requirements from {len(self.files)} file(s): {summary}"
            + (f"; {len(self.broken)} broken installed" if self.broken else "")
            + (f"; {len(self.errors)} unreadable declaration(s)" if self.errors else ""),
        ]
        if self.checks:
            w_name = min(40, max(len(c.declared) for c in self.checks))
            w_inst = max(len("installed"), *(len(c.installed_version or "-") for c in self.checks))
            pinned_done = False
            lines.append("pinned:" if self.checks[0].pinned else "declared:")
            for c in self.checks:
                if not c.pinned and not pinned_done:
                    pinned_done = True
                    if self.checks[0].pinned:
                        lines.append("not pinned:")
                mark = "ok" if c.status == STATUS_OK else c.status.upper()
                decl = c.declared if len(c.declared) <= w_name else c.declared[: w_name - 3] + "..."
                lines.append(
                    f"  {mark:<15} {decl:<{w_name}}  {(c.installed_version or '-'):<{w_inst}}  "
                    f"{c.source}"
                )
                for p in c.problems:
                    lines.append(f"  {'':<15} - {p}")
                for n in c.notes:
                    lines.append(f"  {'':<15}   note: {n}")
        if self.broken:
            lines.append("broken installed requirements (as pip check reports them):")
            lines += [f"  {b}" for b in self.broken]
        if self.errors:
            lines.append("declarations that could not be read:")
            lines += [f"  {e}" for e in self.errors]
        if self.notes:
            lines.append("notes:")
            lines += [f"  {n}" for n in self.notes]
        lines.append("result: " + ("OK" if self.ok else f"MISMATCH (exit code {self.exit_code})"))
        return "\n".join(lines)


# ---------------------------------------------------------------------------- parsing
@dataclass
class _Declared:
    text: str
    source: str
    requirement: Any = None  # packaging Requirement, or None for unchecked entries
    constraint: bool = False
    note: str | None = None
    python_pin: tuple[str, bool] | None = None  # (running version, matches) for conda python


@dataclass
class _Collected:
    declared: list[_Declared] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)
    # ``-r``/``-c`` includes found on the last line read: (path, constraint, source)
    pending: list[tuple[Path, bool, str]] = field(default_factory=list)


def _rel(path: Path) -> str:
    """``path`` relative to the current folder when inside it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path.absolute()) if rel.startswith("..") else rel


def _read_text(path: Path, out: _Collected, source: str) -> str | None:
    try:
        return _io.read_text(path, "requirements")
    except UnicodeDecodeError as exc:
        out.errors.append(DeclarationError(source, "", f"not UTF-8 text ({exc.reason})"))
    except ValueError as exc:  # a FIFO, device or directory, or a file over its cap
        out.errors.append(DeclarationError(source, "", str(exc)))
    except IsADirectoryError:
        out.errors.append(DeclarationError(source, "", "is a directory, not a file"))
    except FileNotFoundError:
        out.errors.append(DeclarationError(source, "", "file not found"))
    except OSError as exc:
        out.errors.append(DeclarationError(source, "", f"cannot be read ({exc.strerror})"))
    return None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with backslash continuations joined."""
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = number
        if raw.endswith("\\") and not _COMMENT.search(raw[:-1]):
            buf.append(raw[:-1])
            continue
        buf.append(raw)
        yield start, " ".join(part.strip() for part in buf)
        buf = []
    if buf:
        yield start, " ".join(part.strip() for part in buf)


def _split_option(line: str) -> tuple[str, str]:
    match = re.match(r"(--?[A-Za-z][A-Za-z0-9-]*)(?:\s*=\s*|\s+)?(.*)$", line)
    if not match:
        return line, ""
    return match.group(1), match.group(2).strip()


def _looks_like_location(text: str) -> bool:
    return (
        "://" in text
        or text.startswith((".", "/", "~", "file:"))
        or text.lower().endswith(_ARCHIVE)
        or os.sep in text
    )


def _add_requirement_line(
    text: str, source: str, base: Path, out: _Collected, constraint: bool = False
) -> None:
    """One requirement-file line (already stripped of comments) into ``out``."""
    text = _ENV_VAR.sub(lambda m: os.environ.get(m.group(1), m.group(0)), text)
    if text.startswith("-"):
        _add_option_line(text, source, base, out, constraint)
        return
    text = _PER_REQUIREMENT_OPTION.sub("", text).strip()
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        egg = _EGG.search(text)
        if egg:
            _add_requirement_line(egg.group(1), source, base, out, constraint)
            out.declared[-1].note = f"installed from {text.split('#')[0]}: only presence is checked"
            return
        if _looks_like_location(text):
            out.declared.append(
                _Declared(
                    text=text,
                    source=source,
                    note="a URL or path without a package name (name @ URL): not checked",
                )
            )
            return
        message = str(exc).splitlines()[0] if str(exc) else "invalid requirement"
        out.errors.append(DeclarationError(source, text, f"invalid requirement: {message}"))
        return
    note = "direct reference (name @ URL): only presence is checked" if req.url else None
    out.declared.append(
        _Declared(text=text, source=source, requirement=req, constraint=constraint, note=note)
    )


def _add_option_line(text: str, source: str, base: Path, out: _Collected, constraint: bool) -> None:
    """An option line: ``-r``/``-c`` includes, ``-e`` editables; index options are ignored."""
    option, value = _split_option(text)
    if option in ("-r", "--requirement", "-c", "--constraint"):
        if not value:
            out.errors.append(DeclarationError(source, text, f"{option} needs a file name"))
            return
        include = Path(value).expanduser()
        if not include.is_absolute():
            include = base / include
        # read by the caller's loop (iteratively, depth-bounded), in place of this line
        out.pending.append((include, option in ("-c", "--constraint"), source))
        return
    if option in ("-e", "--editable"):
        egg = _EGG.search(value)
        if egg:
            _add_requirement_line(egg.group(1), source, base, out, constraint)
            out.declared[-1].note = f"editable install of {value}: only presence is checked"
        else:
            out.declared.append(
                _Declared(
                    text=text,
                    source=source,
                    note="editable install without #egg=NAME: not checked",
                )
            )
        return
    if option not in _IGNORED_OPTIONS:
        out.errors.append(
            DeclarationError(source, text, f"unknown option {option!r} in a requirements file")
        )


def _open_requirements(
    path: Path, out: _Collected, constraint: bool, source: str | None
) -> tuple[Iterator[tuple[int, str]], str, Path, bool] | None:
    """A requirements file's lines to read, or None (read already, or unreadable)."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        out.errors.append(DeclarationError(source or str(path), "", f"cannot be read ({exc})"))
        return None
    if resolved in out.seen:
        return None  # an include cycle, or the same file named twice
    out.seen.add(resolved)
    text = _read_text(path, out, source or _rel(path))
    if text is None:
        return None
    out.files.append(_rel(path))
    return _logical_lines(text), _rel(path), path.parent, constraint


def _parse_requirements_file(
    path: Path, out: _Collected, constraint: bool = False, source: str | None = None
) -> None:
    """A requirements file and, in place of their ``-r``/``-c`` lines, the files it
    includes: read with a stack (no recursion), at most ``MAX_INCLUDE_DEPTH`` deep."""
    first = _open_requirements(path, out, constraint, source)
    stack = [first] if first is not None else []
    while stack:
        lines, name, base, cons = stack[-1]
        item = next(lines, None)
        if item is None:
            stack.pop()
            continue
        number, line = item
        line = _COMMENT.sub("", line).strip()
        if not line:
            continue
        _add_requirement_line(line, f"{name}:{number}", base, out, cons)
        pending, out.pending = out.pending, []
        for inc, inc_cons, inc_source in pending:
            if len(stack) >= MAX_INCLUDE_DEPTH:
                exc = DeclarationTooComplexError(
                    f"-r/-c includes nested more than {MAX_INCLUDE_DEPTH} files deep; "
                    f"{_rel(inc)} and what it includes are not read"
                )
                out.errors.append(DeclarationError(inc_source, "", str(exc)))
                continue
            opened = _open_requirements(inc, out, cons or inc_cons, inc_source)
            if opened is not None:
                stack.append(opened)


def _drain_includes(out: _Collected) -> None:
    """Read the includes a line outside a requirements file named (environment.yml)."""
    pending, out.pending = out.pending, []
    for inc, cons, source in pending:
        _parse_requirements_file(inc, out, constraint=cons, source=source)


def _check_toml_nesting(text: str, name: str) -> None:
    """DeclarationTooComplexError when TOML arrays / inline tables nest deeper than
    ``MAX_NESTING`` (tomllib recurses per level)."""
    stripped = _TOML_STRINGS.sub("", text)
    depth = json_depth(stripped.replace('"', "").replace("'", ""))
    if depth > MAX_NESTING:
        raise DeclarationTooComplexError(
            f"{name}: TOML nested {depth} levels deep (at most {MAX_NESTING} are read)"
        )


_TOML_STRINGS = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
)


def _line_of(text: str, needle: str, start: int = 0) -> int | None:
    """1-based line of the first quoted (or bare) occurrence of ``needle`` at or after ``start``."""
    for quote in ('"', "'"):
        pos = text.find(f"{quote}{needle}{quote}", start)
        if pos >= 0:
            return text.count("\n", 0, pos) + 1
    pos = text.find(needle, start)
    if pos < 0 and start:
        return _line_of(text, needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else None


def _toml_anchor(text: str, table: str, key: str | None) -> int:
    """Offset of ``[table]`` (and of ``key =`` inside it) in TOML text; 0 if not found."""
    match = re.search(rf"^\s*\[\s*{re.escape(table)}\s*\]", text, re.MULTILINE)
    pos = match.end() if match else 0
    if key is not None:
        quoted = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
        found = re.compile(rf"^\s*{quoted}\s*=", re.MULTILINE).search(text, pos)
        if found:
            pos = found.start()
    return pos


def _toml_module() -> Any:
    """``tomllib`` (Python 3.11+) or ``tomli``; ``ImportError`` when neither is there."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - Python 3.10

    return tomli  # pragma: no cover


def _require_extras() -> None:
    """Fail before any work when a library of the ``envcheck`` extra is missing."""
    missing: list[str] = []
    for module, dist in (("packaging", "packaging"), ("yaml", "pyyaml")):
        try:
            __import__(module)
        except ImportError:
            missing.append(dist)
    try:
        _toml_module()
    except ImportError:
        missing.append("tomli")
    if missing:
        raise ImportError(
            f"gyreprof envcheck needs {', '.join(missing)} (the 'envcheck' extra), which "
            f"{'is' if len(missing) == 1 else 'are'} not installed here: {INSTALL_HINT}"
        )


def _parse_pyproject(
    path: Path, out: _Collected, extras: Sequence[str] | None, all_extras: bool
) -> None:
    """``[project].dependencies`` and the asked-for optional groups of a pyproject.toml."""
    name = _rel(path)
    text = _read_text(path, out, name)
    if text is None:
        return
    try:
        _check_toml_nesting(text, name)
        data = _toml_module().loads(text)
    except DeclarationTooComplexError as exc:
        out.errors.append(DeclarationError(name, "", str(exc)))
        return
    except RecursionError:
        out.errors.append(DeclarationError(name, "", "TOML nested too deeply to read"))
        return
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        out.errors.append(DeclarationError(name, "", f"invalid TOML: {exc}"))
        return
    out.files.append(name)
    project = data.get("project")
    if not isinstance(project, dict):
        if "poetry" in data.get("tool", {}):
            out.notes.append(f"{name}: [tool.poetry] dependencies are not read; only [project]")
        else:
            out.notes.append(f"{name}: no [project] table, nothing declared")
        return
    dynamic = project.get("dynamic", [])
    if isinstance(dynamic, list) and "dependencies" in dynamic:
        out.notes.append(f"{name}: dependencies are dynamic (set by the build backend): not read")
    reader = _PyprojectReader(path, name, text, project, out)
    reader.add(
        project.get("dependencies", []),
        "dependencies",
        _toml_anchor(text, "project", "dependencies"),
    )
    for key in reader.wanted_groups(extras, all_extras):
        reader.add_group(key)
    if reader.groups and not extras and not all_extras:
        out.notes.append(
            f"{name}: optional groups not checked ({', '.join(sorted(reader.groups))}); "
            "pass --extras NAME or --all-extras"
        )


class _PyprojectReader:
    """Adds one pyproject's requirement lists to ``out``, expanding the project's own extras.

    A group such as ``all = ["pkg[gym,plot]"]`` that names the project itself
    stands for those groups; each group is read once.
    """

    def __init__(
        self, path: Path, name: str, text: str, project: dict[str, Any], out: _Collected
    ) -> None:
        self.path, self.name, self.text, self.out = path, name, text, out
        self.own = canonicalize_name(str(project["name"])) if project.get("name") else None
        groups = project.get("optional-dependencies", {})
        if not isinstance(groups, dict):
            out.errors.append(
                DeclarationError(name, "", "[project.optional-dependencies] is not a table")
            )
            groups = {}
        self.groups: dict[str, Any] = groups
        self.canonical = {canonicalize_name(str(k)): k for k in groups}
        self.done: set[str] = set()

    def wanted_groups(self, extras: Sequence[str] | None, all_extras: bool) -> list[str]:
        """The group keys asked for; an unknown name is a declaration error."""
        if all_extras:
            return list(self.groups)
        wanted: list[str] = []
        for e in extras or []:
            key = self.canonical.get(canonicalize_name(e))
            if key is None:
                known = ", ".join(sorted(self.groups)) or "none"
                self.out.errors.append(
                    DeclarationError(
                        self.name, e, f"no optional-dependency group {e!r} (known: {known})"
                    )
                )
            else:
                wanted.append(key)
        return wanted

    def add_group(self, key: str) -> None:
        if key in self.done:
            return
        self.done.add(key)
        anchor = _toml_anchor(self.text, "project.optional-dependencies", key)
        self.add(self.groups[key], f"optional-dependencies.{key}", anchor)

    def add(self, entries: object, where: str, anchor: int) -> None:
        if not isinstance(entries, list):
            self.out.errors.append(DeclarationError(self.name, where, "must be a list of strings"))
            return
        for entry in entries:
            if not isinstance(entry, str):
                self.out.errors.append(
                    DeclarationError(self.name, repr(entry), f"{where}: entries must be strings")
                )
                continue
            line = _line_of(self.text, entry, anchor)
            source = f"{self.name}:{line}" if line else self.name
            before = len(self.out.declared)
            _add_requirement_line(entry, source, self.path.parent, self.out)
            _drain_includes(self.out)
            if len(self.out.declared) > before:
                self._expand_own(source, entry)

    def _expand_own(self, source: str, entry: str) -> None:
        """The last entry names the project itself: replace it by the groups it names."""
        req = self.out.declared[-1].requirement
        if not self.own or req is None or canonicalize_name(req.name) != self.own:
            return
        self.out.declared.pop()
        for extra in sorted(req.extras):
            key = self.canonical.get(canonicalize_name(extra))
            if key is None:
                self.out.errors.append(
                    DeclarationError(source, entry, f"no group {extra!r} to expand")
                )
            else:
                self.add_group(key)


def _bounded_yaml_loader() -> Any:
    """A SafeLoader that refuses, while composing (before anything is built), nesting
    deeper than ``MAX_NESTING`` and more than ``MAX_YAML_NODES`` nodes once aliases are
    expanded (an alias weighs what its anchor does, so a billion-laughs file of a few
    hundred bytes is refused at once): DeclarationTooComplexError."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._gp_depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._gp_depth += 1
            try:
                if self._gp_depth > MAX_NESTING:
                    raise DeclarationTooComplexError(
                        f"YAML nested more than {MAX_NESTING} levels deep"
                    )
                node = super().compose_node(parent, index)
            finally:
                self._gp_depth -= 1
            if getattr(node, "_gp_weight", None) is None:  # an alias: its anchor's weight
                value = node.value
                weight = 1
                if isinstance(node, yaml.SequenceNode):
                    weight += sum(int(getattr(n, "_gp_weight", 1)) for n in value)
                elif isinstance(node, yaml.MappingNode):
                    weight += sum(
                        int(getattr(k, "_gp_weight", 1)) + int(getattr(v, "_gp_weight", 1))
                        for k, v in value
                    )
                node._gp_weight = weight
                if weight > MAX_YAML_NODES:
                    raise DeclarationTooComplexError(
                        f"YAML expands to more than {MAX_YAML_NODES:,} nodes through its "
                        "aliases (&anchor / *alias); not expanded"
                    )
            return node

    return BoundedLoader


def _yaml_dependencies(text: str) -> tuple[list[str], list[str]]:
    """(conda entries, pip entries) of an environment.yml; ``yaml.YAMLError`` if malformed,
    DeclarationTooComplexError beyond the bounds (``_bounded_yaml_loader``)."""
    import yaml

    try:
        data = yaml.load(text, Loader=_bounded_yaml_loader())  # noqa: S506 - a SafeLoader
    except RecursionError:
        raise DeclarationTooComplexError("YAML nested too deeply to read") from None
    conda: list[str] = []
    pip: list[str] = []
    deps = data.get("dependencies", []) if isinstance(data, dict) else []
    for item in deps if isinstance(deps, list) else []:
        if isinstance(item, dict):
            entries = item.get("pip", [])
            pip += [str(x) for x in entries or []] if isinstance(entries, list) else []
        elif item is not None:
            conda.append(str(item))
    return conda, pip


_CONDA_PYTHON = re.compile(r"^(?:[\w.-]+::)?python\s*(?P<spec>[=<>!~].*)?$")


def _running_python() -> str:
    return ".".join(str(p) for p in sys.version_info[:3])


def _conda_python_matches(spec: str, running: str) -> bool | None:
    """Whether conda version spec ``spec`` ('=3.11', '>=3.10,<3.12', '3.11.*') admits ``running``.

    None when the spec is not understood.
    """
    if "|" in spec:
        results = [_conda_python_matches(part, running) for part in spec.split("|")]
        if any(r is None for r in results):
            return None
        return any(results)
    if spec.startswith("=") and not spec.startswith("=="):
        prefix = spec[1:].removesuffix(".*").removesuffix("*").rstrip(".")
        return running == prefix or running.startswith(prefix + ".")
    try:
        return SpecifierSet(spec).contains(running, prereleases=True)
    except Exception:  # packaging's InvalidSpecifier: a conda-only syntax
        return None


def _add_conda_python(entry: str, source: str, out: _Collected) -> None:
    """A conda ``python=3.11`` entry, checked against the running interpreter."""
    match = _CONDA_PYTHON.match(entry.replace(" ", ""))
    if not match or not match.group("spec"):
        return
    running = _running_python()
    ok = _conda_python_matches(match.group("spec"), running)
    if ok is None:
        out.notes.append(f"{source}: conda spec {entry!r} not understood; not checked")
        return
    out.declared.append(
        _Declared(
            text=entry,
            source=source,
            note="conda python pin, compared with the running interpreter",
            python_pin=(running, ok),
        )
    )


def _parse_environment_yml(path: Path, out: _Collected) -> None:
    name = _rel(path)
    text = _read_text(path, out, name)
    if text is None:
        return
    import yaml

    try:
        conda, pip = _yaml_dependencies(text)
    except DeclarationTooComplexError as exc:
        out.errors.append(DeclarationError(name, "", str(exc)))
        return
    except yaml.YAMLError as exc:  # a bad file is reported, not raised
        out.errors.append(DeclarationError(name, "", f"invalid YAML: {exc}"))
        return
    out.files.append(name)
    for entry in pip:
        entry = _COMMENT.sub("", entry).strip()
        if not entry:
            continue
        line = _line_of(text, entry)
        _add_requirement_line(entry, f"{name}:{line}" if line else name, path.parent, out)
        _drain_includes(out)
    if conda:
        others = 0
        for entry in conda:
            if _CONDA_PYTHON.match(entry.replace(" ", "")):
                line = _line_of(text, entry)
                _add_conda_python(entry, f"{name}:{line}" if line else name, out)
            elif entry.strip() != "pip":
                others += 1
        if others:
            out.notes.append(
                f"{name}: {others} conda package(s) outside the pip section are not checked "
                "(compare with `conda list`)"
            )


# ---------------------------------------------------------------------------- comparing
def _installed() -> dict[str, metadata.Distribution]:
    """Canonical name -> the distribution that ``import`` would find first."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except (KeyError, OSError):
            continue
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def _dist_name(dist: metadata.Distribution) -> str:
    return str(dist.metadata["Name"])


def _version_ok(spec: Any, version: str) -> bool | None:
    """Whether ``version`` satisfies ``spec``; None when the installed version is not PEP 440."""
    try:
        return bool(spec.contains(Version(version), prereleases=True))
    except InvalidVersion:
        return None


def _marker_applies(req: Any, extra: str = "") -> bool:
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate({"extra": extra}))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _extra_requirements(dist: metadata.Distribution, extra: str) -> list[Any]:
    """The requirements that ``dist[extra]`` adds beyond plain ``dist``."""
    out = []
    for text in dist.requires or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None:
            continue
        try:
            with_extra = req.marker.evaluate({"extra": extra})
            without = req.marker.evaluate({"extra": ""})
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
        if with_extra and not without:
            out.append(req)
    return out


def _is_pinned(req: Any) -> bool:
    specs = list(req.specifier)
    return bool(specs) and all(
        s.operator in ("==", "===") and not s.version.endswith(".*") for s in specs
    )


def _check_one(item: _Declared, installed: dict[str, metadata.Distribution]) -> RequirementCheck:
    """One declared requirement against the installed distributions."""
    req = item.requirement
    notes = [item.note] if item.note else []
    if item.python_pin is not None:
        return _check_python_pin(item, notes)
    if req is None:
        return RequirementCheck(
            name=item.text,
            declared=item.text,
            source=item.source,
            status=STATUS_UNCHECKED,
            pinned=False,
            notes=notes,
        )
    base = {
        "name": req.name,
        "declared": item.text,
        "source": item.source,
        "pinned": _is_pinned(req),
    }
    if not _marker_applies(req):
        notes.append(f"marker {str(req.marker)!r} is false here: not needed")
        return RequirementCheck(
            **base, status=STATUS_SKIPPED, notes=notes, constraint=item.constraint
        )
    dist = installed.get(canonicalize_name(req.name))
    if dist is None:
        if item.constraint:
            notes.append("constraint only; the package is not installed")
            return RequirementCheck(**base, status=STATUS_SKIPPED, notes=notes, constraint=True)
        return RequirementCheck(
            **base,
            status=STATUS_MISSING,
            problems=[f"{req.name} is not installed (pip install {item.text!r})"],
            notes=notes,
        )
    inst_name, inst_version = _dist_name(dist), str(dist.version)
    if req.name != inst_name and req.name.lower() != inst_name.lower():
        notes.append(
            f"declared as {req.name!r}, installed as {inst_name!r}: the same package after "
            "name normalisation (PEP 503)"
        )
    problems: list[str] = []
    status = STATUS_OK
    verdict = _version_ok(req.specifier, inst_version) if req.specifier else True
    if verdict is None:
        notes.append(f"installed version {inst_version!r} is not a PEP 440 version: not compared")
    elif not verdict:
        status = STATUS_VERSION
        problems.append(f"{inst_name} {inst_version} is installed; {req.specifier} is declared")
    missing_extras = _check_extras(req, dist, installed, problems, notes)
    if missing_extras and status == STATUS_OK:
        status = STATUS_EXTRAS
    return RequirementCheck(
        **base,
        status=status,
        installed_name=inst_name,
        installed_version=inst_version,
        problems=problems,
        notes=notes,
        missing_extras=missing_extras,
        constraint=item.constraint,
    )


def _check_python_pin(item: _Declared, notes: list[str]) -> RequirementCheck:
    """A conda ``python=`` pin against the running interpreter."""
    assert item.python_pin is not None
    running, ok = item.python_pin
    return RequirementCheck(
        name="python",
        declared=item.text,
        source=item.source,
        status=STATUS_OK if ok else STATUS_VERSION,
        pinned=bool(re.fullmatch(r"[\w.:-]*python\s*==?\s*\d+\.\d+\.\d+", item.text)),
        installed_name="python",
        installed_version=running,
        problems=[] if ok else [f"the environment declares {item.text}; Python {running} runs"],
        notes=notes,
    )


def _check_extras(
    req: Any,
    dist: metadata.Distribution,
    installed: dict[str, metadata.Distribution],
    problems: list[str],
    notes: list[str],
) -> list[str]:
    """The requested extras of ``req`` whose own requirements are not installed (sorted)."""
    missing: set[str] = set()
    provided = {canonicalize_name(e) for e in dist.metadata.get_all("Provides-Extra") or []}
    for extra in sorted(req.extras):
        if canonicalize_name(extra) not in provided:
            notes.append(f"{_dist_name(dist)} {dist.version} has no extra {extra!r}")
            continue
        for sub in _extra_requirements(dist, extra):
            if not _marker_applies(sub, extra):
                continue
            sub_dist = installed.get(canonicalize_name(sub.name))
            if sub_dist is None:
                missing.add(extra)
                problems.append(f"extra [{extra}] needs {sub}, which is not installed")
            elif sub.specifier and _version_ok(sub.specifier, str(sub_dist.version)) is False:
                missing.add(extra)
                problems.append(f"extra [{extra}] needs {sub}, but {sub_dist.version} is installed")
    return sorted(missing)


def _broken(installed: dict[str, metadata.Distribution]) -> list[BrokenRequirement]:
    """Unsatisfied requirements of installed distributions, as ``pip check`` finds them."""
    out: list[BrokenRequirement] = []
    for key in sorted(installed):
        dist = installed[key]
        name, version = _dist_name(dist), str(dist.version)
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if not _marker_applies(req):
                continue
            dep = installed.get(canonicalize_name(req.name))
            if dep is None:
                out.append(BrokenRequirement(name, version, str(req), None))
            elif req.specifier and _version_ok(req.specifier, str(dep.version)) is False:
                out.append(BrokenRequirement(name, version, str(req), str(dep.version)))
    return out


# ---------------------------------------------------------------------------- entry point
def _kind(path: Path) -> str:
    lower = path.name.lower()
    if lower.endswith(".toml"):
        return "pyproject"
    if lower.endswith((".yml", ".yaml")):
        return "conda"
    return "requirements"


def discover(folder: str | os.PathLike[str] = ".") -> list[Path]:
    """The declaration files in ``folder``: requirements*.txt, pyproject.toml, environment.yml."""
    base = Path(folder)
    found = sorted(base.glob("requirements*.txt"))
    found += (
        sorted(p for p in (base / "requirements").glob("*.txt"))
        if (base / "requirements").is_dir()
        else []
    )
    for name in ("pyproject.toml", "environment.yml", "environment.yaml"):
        if (base / name).is_file():
            found.append(base / name)
    return found


def envcheck(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    *,
    extras: Iterable[str] | None = None,
    all_extras: bool = False,
    broken: bool = True,
) -> EnvReport:
    """Compare declared requirements with the installed distributions; return an EnvReport.

    ``paths``: files (requirements*.txt, pyproject.toml, environment.yml) or folders
    to look in; default the current folder.  ``extras``: optional-dependency groups of
    pyproject.toml to check as well (``all_extras`` for all of them).  ``broken``: also
    list unsatisfied requirements among installed distributions (like ``pip check``).

    Raises ``ValueError`` when nothing to check is found, and ``ImportError``
    (naming what is missing and ``pip install "gyreprof[envcheck]"``) before
    reading anything when ``packaging``, PyYAML or, on Python 3.10, ``tomli`` is
    not installed.  Malformed declarations are not raised: they are listed in
    ``EnvReport.errors`` with ``file:line``.
    """
    _require_extras()
    files = _files_to_read(paths)
    extras_list = list(extras or [])
    out = _read_declarations(files, extras_list, all_extras)
    installed = _installed()
    checks = [_check_one(item, installed) for item in out.declared]
    checks.sort(key=lambda c: (not c.pinned, canonicalize_name(c.name), c.source))
    return EnvReport(
        files=out.files,
        checks=checks,
        broken=_broken(installed) if broken else [],
        errors=out.errors,
        notes=out.notes,
    )


def _files_to_read(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None,
) -> list[Path]:
    """The declaration files named, and those found in the folders named (default ``.``)."""
    if paths is None:
        items: list[Path] = [Path(".")]
    elif isinstance(paths, (str, os.PathLike)):
        items = [Path(paths)]
    else:
        try:
            items = [Path(p) for p in paths]
        except TypeError:
            raise ArgumentTypeError(
                f"paths must be a path or a list of paths, got {type(paths).__name__} {paths!r}"
            ) from None
    files: list[Path] = []
    for item in items:
        if not item.is_dir():
            files.append(item)
            continue
        inside = discover(item)
        if not inside:
            raise InvalidValueError(
                f"no requirements*.txt, pyproject.toml or environment.yml in {str(item)!r}; "
                "pass the files to check"
            )
        files += inside
    return files


def _read_declarations(files: list[Path], extras: list[str], all_extras: bool) -> _Collected:
    """Every declared requirement of ``files``, with the errors and notes met on the way."""
    out = _Collected()
    for path in files:
        kind = _kind(path)
        if kind == "pyproject":
            _parse_pyproject(path, out, extras, all_extras)
        elif kind == "conda":
            _parse_environment_yml(path, out)
        else:
            _parse_requirements_file(path, out)
    if extras and not any(_kind(p) == "pyproject" for p in files):
        out.notes.append("--extras applies to pyproject.toml optional groups; none was read")
    return out
