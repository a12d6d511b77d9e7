"""Type stubs for gyreprof._core.guard (compiled): the C env-call guard."""

from collections.abc import Callable, Sequence
from typing import Any

from gyreprof._core.recorder import Recorder

KINDS: tuple[str, str, str, str]
BINDING_ATTR: str

class Binding:
    inside: bool
    def __init__(self, env_step: Any, env_reset: Any, step_async: Any, step_wait: Any) -> None: ...
    def timer(self, kind: str) -> Any: ...

class CalibrationSlot:
    def __init__(self, state: Any, recorder: Recorder, slots: Sequence[int]) -> None: ...

class Guard:
    fn: Callable[..., Any]
    kind: str
    guarded: bool
    def __init__(
        self,
        fn: Callable[..., Any],
        kind: str,
        guarded: bool = True,
        slot: CalibrationSlot | None = None,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, objtype: Any) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...  # the metadata _instrument.mark sets

def configure(
    state_type: type,
    timer_type: type,
    thread: Callable[[], Any],
    bind: Callable[[Any], tuple[Recorder, tuple[int, ...]] | None] | None = None,
) -> None: ...
def forget() -> None: ...
def fast_layout() -> bool: ...
def _remake(fn: Callable[..., Any], kind: str, guarded: bool) -> Guard: ...
def timer_direct() -> int: ...
def thread_reads_binding() -> bool: ...
