"""How a result reaches the words it is written in without importing its writer.

The result classes (``Summary``, ``PhaseStats``, ``Window``, ``WaitReport``, ``Verdict``,
``RolloutReport``, ``SweepResult`` ...) sit on floors below :mod:`gyreprof.render`, so
they must not import it. Each renderer module registers its functions here when it is
imported, under ``"<module>.<function>"`` (``"text.summary"``, ``"markdown.verdict"``,
``"json.write"``); a result's ``__str__``, ``to_markdown``, ``to_csv``, ``to_json`` and
``to_metrics`` look the function up by that name and call it.

The first lookup of a name not yet registered asks the loader that the root package
installs (it imports ``gyreprof.render.<module>``): any import of a result module runs
``gyreprof/__init__`` first, so ``print(summary)`` works with only ``gyreprof.model.summary``
imported, and the renderers still load only when something is written.
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing: `import gyreprof` imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

__all__ = ["metrics", "path", "register", "rows", "set_loader", "text"]

_FORMS: dict[str, Callable[..., Any]] = {}
_loader: Callable[[str], object] | None = None


def register(module: str, *functions: Callable[..., Any]) -> None:
    """Register ``functions`` as ``"<module>.<function name>"``. A module imported again
    (a reload) replaces its own functions; a name taken by a function defined elsewhere
    raises ValueError naming it."""
    for fn in functions:
        name = f"{module}.{fn.__name__}"
        held = _FORMS.get(name)
        if held is not None and (held.__module__, held.__qualname__) != (
            fn.__module__,
            fn.__qualname__,
        ):
            from gyreprof._support.errors import (
                InvalidValueError,  # here: `import gyreprof` loads _forms
            )

            raise InvalidValueError(f"form {name!r} is already registered by {held.__module__}")
        _FORMS[name] = fn


def set_loader(loader: Callable[[str], object]) -> None:
    """The function that loads the renderer module named by a form's first part."""
    global _loader
    _loader = loader


def _find(name: str) -> Callable[..., Any]:
    fn = _FORMS.get(name)
    if fn is None and _loader is not None:
        _loader(name.partition(".")[0])
        fn = _FORMS.get(name)
    if fn is None:
        from gyreprof._support.errors import MissingKeyError

        raise MissingKeyError(f"no renderer is registered for {name!r}: import gyreprof.render")
    return fn


def text(name: str, *args: Any, **kwargs: Any) -> str:
    """The registered form ``name`` applied to ``args``, for the forms that return text."""
    out: str = _find(name)(*args, **kwargs)
    return out


def metrics(name: str, *args: Any, **kwargs: Any) -> dict[str, float]:
    """The registered form ``name`` applied to ``args``, for the flat metric dicts."""
    out: dict[str, float] = _find(name)(*args, **kwargs)
    return out


def rows(name: str, *args: Any, **kwargs: Any) -> list[list[str]]:
    """The registered form ``name`` applied to ``args``, for the tables as cells."""
    out: list[list[str]] = _find(name)(*args, **kwargs)
    return out


def path(name: str, *args: Any, **kwargs: Any) -> Path:
    """The registered form ``name`` applied to ``args``, for the forms that write a file."""
    out: Path = _find(name)(*args, **kwargs)
    return out
