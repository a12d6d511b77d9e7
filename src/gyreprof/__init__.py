"""gyreprof: measure RL sampler loops at full rate and turn the numbers into answers.

Every public name loads on first use, so ``import gyreprof`` stays cheap inside
worker processes and the diagnosis tools work even where the compiled core is
not built yet.

Type checkers and IDEs read the ``if TYPE_CHECKING:`` imports below, so ``gp.Profiler``
is the real class to them; at run time ``__getattr__`` loads each name from the
module ``_LAZY`` maps it to, on first use. The two lists must name the same things
(tests/test_structure_imports.py checks it).
"""

from __future__ import annotations

from gyreprof._support import forms as _forms
from gyreprof._version import __version__

# typing.TYPE_CHECKING without importing typing (most of `import gyreprof`'s time);
# mypy and pyright treat any name TYPE_CHECKING this way.
TYPE_CHECKING = False
if TYPE_CHECKING:  # what _LAZY and _SUBMODULES load, as type checkers should see it
    from typing import Any

    from gyreprof import analysis as analysis
    from gyreprof import diagnostics as diagnostics
    from gyreprof import export as export
    from gyreprof import integrations as integrations
    from gyreprof import live as live
    from gyreprof.analysis.parallelism import Census as Census
    from gyreprof.analysis.parallelism import ParallelismReport as ParallelismReport
    from gyreprof.analysis.parallelism import check_parallelism as check_parallelism
    from gyreprof.analysis.parallelism import compare_throughput as compare_throughput
    from gyreprof.analysis.parallelism import register_worker as register_worker
    from gyreprof.analysis.parallelism.census import census as census
    from gyreprof.analysis.sweep import SweepPoint as SweepPoint
    from gyreprof.analysis.sweep import SweepResult as SweepResult
    from gyreprof.analysis.sweep import sweep as sweep
    from gyreprof.analysis.verdict import Verdict as Verdict
    from gyreprof.analysis.verdict import diagnose as diagnose
    from gyreprof.analysis.wait import WaitReport as WaitReport
    from gyreprof.analysis.wait import wait_report as wait_report
    from gyreprof.diagnostics.banner import banner as banner
    from gyreprof.diagnostics.doctor import ProcessDiagnosis as ProcessDiagnosis
    from gyreprof.diagnostics.doctor import doctor as doctor
    from gyreprof.diagnostics.envcheck import envcheck as envcheck
    from gyreprof.diagnostics.selfcheck import selfcheck as selfcheck
    from gyreprof.model.snapshot import Snapshot as Snapshot
    from gyreprof.model.snapshot import merge as merge
    from gyreprof.model.summary import PhaseStats as PhaseStats
    from gyreprof.model.summary import Summary as Summary
    from gyreprof.model.window import Window as Window
    from gyreprof.model.window import WindowStats as WindowStats
    from gyreprof.recording.profiler import Profiler as Profiler

# public name -> module that defines it (loaded on first attribute access)
_LAZY: dict[str, str] = {
    "Profiler": "gyreprof.recording.profiler",
    "Summary": "gyreprof.model.summary",
    "PhaseStats": "gyreprof.model.summary",
    "Snapshot": "gyreprof.model.snapshot",
    "Window": "gyreprof.model.window",
    "WindowStats": "gyreprof.model.window",
    "merge": "gyreprof.model.snapshot",
    "wait_report": "gyreprof.analysis.wait",
    "WaitReport": "gyreprof.analysis.wait",
    "diagnose": "gyreprof.analysis.verdict",
    "Verdict": "gyreprof.analysis.verdict",
    "sweep": "gyreprof.analysis.sweep",
    "SweepResult": "gyreprof.analysis.sweep",
    "SweepPoint": "gyreprof.analysis.sweep",
    "census": "gyreprof.analysis.parallelism.census",
    "register_worker": "gyreprof.analysis.parallelism",
    "check_parallelism": "gyreprof.analysis.parallelism",
    "compare_throughput": "gyreprof.analysis.parallelism",
    "ParallelismReport": "gyreprof.analysis.parallelism",
    "Census": "gyreprof.analysis.parallelism",
    "doctor": "gyreprof.diagnostics.doctor",
    "ProcessDiagnosis": "gyreprof.diagnostics.doctor",
    "banner": "gyreprof.diagnostics.banner",
    "envcheck": "gyreprof.diagnostics.envcheck",
    "selfcheck": "gyreprof.diagnostics.selfcheck",
}
_SUBMODULES = {"export", "live", "integrations", "analysis", "diagnostics"}

__all__ = [
    "Census",
    "ParallelismReport",
    "PhaseStats",
    "ProcessDiagnosis",
    "Profiler",
    "Snapshot",
    "Summary",
    "SweepPoint",
    "SweepResult",
    "Verdict",
    "WaitReport",
    "Window",
    "WindowStats",
    "__version__",
    "analysis",
    "banner",
    "census",
    "check_parallelism",
    "compare_throughput",
    "diagnose",
    "diagnostics",
    "doctor",
    "envcheck",
    "export",
    "integrations",
    "live",
    "merge",
    "register_worker",
    "selfcheck",
    "sweep",
    "wait_report",
]


def _load_renderer(module: str) -> None:
    """Import ``gyreprof.render.<module>``, which registers its forms (gyreprof._support.forms)."""
    import importlib

    importlib.import_module(f"gyreprof.render.{module}")


_forms.set_loader(_load_renderer)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt gp.X is an error there

    def __getattr__(name: str) -> Any:
        import importlib  # here: every process of a gyreprof run imports this package

        if name in _SUBMODULES:
            return importlib.import_module(f"gyreprof.{name}")
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'gyreprof' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
