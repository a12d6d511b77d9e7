"""gyreprof: measure RL sampler loops at full rate and turn the numbers into answers.

Every public name loads on first use, so ``import gyreprof`` stays cheap inside
worker processes and the diagnosis tools work even where the compiled core is
not built yet.
"""

from __future__ import annotations

import importlib
from typing import Any

from gyreprof._version import __version__

# public name -> module that defines it (loaded on first attribute access)
_LAZY: dict[str, str] = {
    "Profiler": "gyreprof.profiler",
    "Summary": "gyreprof.summary",
    "PhaseStats": "gyreprof.summary",
    "Snapshot": "gyreprof.summary",
    "Window": "gyreprof.summary",
    "WindowStats": "gyreprof.summary",
    "merge": "gyreprof.summary",
    "wait_report": "gyreprof.analysis.wait",
    "WaitReport": "gyreprof.analysis.wait",
    "diagnose": "gyreprof.analysis.verdict",
    "Verdict": "gyreprof.analysis.verdict",
    "sweep": "gyreprof.analysis.sweep",
    "SweepResult": "gyreprof.analysis.sweep",
    "SweepPoint": "gyreprof.analysis.sweep",
    "census": "gyreprof.analysis.parallelism",
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
    "__version__",
    *sorted(_LAZY),
    *sorted(_SUBMODULES),
]


def __getattr__(name: str) -> Any:
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
