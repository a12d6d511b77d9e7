"""CUDA-synchronised phases: GPU timings that tell the truth.

CUDA kernels run asynchronously: ``y = model(x)`` returns as soon as the work
is queued, so a phase around it measures the launch, and the GPU time lands in
whichever later phase first waits for the GPU (a ``.item()``, a copy to the
host, the next allocation). These helpers call ``torch.cuda.synchronize()``
right before each clock read, so a phase holds the GPU work issued inside it::

    from gyreprof.integrations.torch import cuda_phase, synchronized

    with cuda_phase(prof, "fwd"):          # one phase
        out = policy(obs)

    sp = synchronized(prof)                # every boundary of the profiler
    FWD, XFER = sp.ids("fwd", "xfer")
    sp.begin(); out = policy(obs); sp.lap(FWD); buf.copy_(out); sp.lap(XFER)

On a machine without CUDA (including the CPU build of torch) they add
nothing: the same phases, the same clock reads, no synchronisation, no extra
counters. Synchronising costs throughput (it drains the GPU queue at every
boundary), so use it while profiling, not in production runs.

The phases timed through these helpers are remembered per profiler
(:func:`synchronized_phases`), so ``gp.diagnose`` can warn about GPU-looking
phases that were timed without synchronisation.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

from gyreprof._support.errors import ArgumentTypeError, InvalidValueError, MissingExtraError

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError(
        "gyreprof.integrations.torch",
        "PyTorch",
        extra="torch",
        note="(or install torch for your CUDA version from pytorch.org)",
    ) from exc

from gyreprof.recording.profiler import Profiler

__all__ = [
    "CudaPhase",
    "SynchronizedProfiler",
    "cuda_available",
    "cuda_phase",
    "is_synchronized",
    "mark_synchronized",
    "synchronize_phases",
    "synchronized",
    "synchronized_phases",
]

F = TypeVar("F", bound=Callable[..., Any])

_SYNCED: weakref.WeakKeyDictionary[Profiler, set[str]] = weakref.WeakKeyDictionary()
_SYNCED_LOCK = threading.Lock()


def cuda_available() -> bool:
    """True when torch sees a usable CUDA device (False with the CPU build)."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver means "no CUDA" here
        return False


def mark_synchronized(prof: Profiler, *phases: str) -> None:
    """Record that ``phases`` of ``prof`` are timed with CUDA synchronised (for diagnose)."""
    _check_profiler(prof)
    for name in phases:
        prof.id(name)  # unknown name -> error listing the known ones
    with _SYNCED_LOCK:
        _SYNCED.setdefault(prof, set()).update(phases)


def synchronized_phases(prof: Profiler) -> frozenset[str]:
    """The phases of ``prof`` timed through this module (synchronised where CUDA exists)."""
    with _SYNCED_LOCK:
        return frozenset(_SYNCED.get(prof, ()))


def is_synchronized(prof: Profiler, phase: str) -> bool:
    """Whether ``phase`` of ``prof`` was timed through this module."""
    return phase in synchronized_phases(prof)


def _check_profiler(prof: object) -> None:
    if not isinstance(prof, Profiler):
        raise ArgumentTypeError(f"expected a gyreprof Profiler, got {type(prof).__name__}")


def _sync_function(device: Any) -> Callable[[], None] | None:
    """``torch.cuda.synchronize`` bound to ``device``; None when CUDA is not available."""
    if device is not None:
        if isinstance(device, int) and not isinstance(device, bool):
            if device < 0:
                raise InvalidValueError(f"device index must be >= 0, got {device}")
            device = f"cuda:{device}"  # torch.device(0) needs a CUDA build; this form does not
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise InvalidValueError(
                f"device must be a CUDA device (e.g. 'cuda', 'cuda:0', 0), got {device!r}: {exc}"
            ) from None
        if dev.type != "cuda":
            raise InvalidValueError(
                f"device must be a CUDA device (e.g. 'cuda:0'), got {device!r}; CPU work is "
                "synchronous and needs no synchronised phases"
            )
    if not cuda_available():
        return None
    if device is None:
        return torch.cuda.synchronize
    dev = torch.device(device)
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InvalidValueError(
            f"device {device!r} does not exist: this machine has {torch.cuda.device_count()} "
            "CUDA device(s)"
        )
    return functools.partial(torch.cuda.synchronize, dev)


class CudaPhase:
    """Context manager timing one phase with CUDA synchronised at both ends.

    Reusable and nestable like ``prof.phase(name)``. Without CUDA it is exactly
    ``prof.phase(name)``.
    """

    __slots__ = ("_prof", "_name", "_sync", "_stack")

    def __init__(self, prof: Profiler, name: str, device: Any = None) -> None:
        _check_profiler(prof)
        prof.id(name)
        self._prof = prof
        self._name = name
        self._sync = _sync_function(device)
        self._stack: list[Any] = []
        mark_synchronized(prof, name)

    @property
    def synchronizes(self) -> bool:
        """True when entering/leaving the phase synchronises CUDA (CUDA is available)."""
        return self._sync is not None

    def __enter__(self) -> CudaPhase:
        if self._sync is not None:
            self._sync()
        timer = self._prof.phase(self._name)
        timer.__enter__()
        self._stack.append(timer)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sync is not None and exc_type is None:
            self._sync()
        timer = self._stack.pop()
        timer.__exit__(exc_type, exc, tb)


def cuda_phase(prof: Profiler, name: str, device: Any = None) -> Any:
    """A context manager timing phase ``name`` with CUDA synchronised before each clock read.

    ``device``: the CUDA device to synchronise (``None``: the current one).
    Without CUDA this returns ``prof.phase(name)`` itself (nothing added).
    """
    cp = CudaPhase(prof, name, device)
    if not cp.synchronizes:
        return prof.phase(name)
    return cp


class SynchronizedProfiler:
    """A view of a Profiler whose every clock read is preceded by a CUDA synchronise.

    ``begin``, ``lap``, ``end``, ``phase``, ``timed`` and ``record`` behave as
    the Profiler's own; everything else (``summary``, ``ids``, ``windows``...)
    is the Profiler's. Without CUDA, ``begin``/``lap``/``end``/``phase`` are
    the Profiler's own methods (no wrapper, no cost).
    """

    def __init__(self, prof: Profiler, device: Any = None) -> None:
        _check_profiler(prof)
        self.profiler = prof
        self._device = device
        self._sync = _sync_function(device)
        mark_synchronized(prof, *prof.phases)
        if self._sync is None:
            self.begin: Callable[[], None] = prof.begin
            self.end: Callable[[], None] = prof.end
            self.lap: Callable[[int], None] = prof.lap
        else:
            sync = self._sync
            p_begin, p_end = prof.begin, prof.end

            def begin() -> None:
                sync()
                p_begin()

            def end() -> None:
                sync()
                p_end()

            def lap(phase: int) -> None:
                sync()
                prof.lap(phase)

            self.begin, self.end, self.lap = begin, end, lap

    @property
    def synchronizes(self) -> bool:
        """True when clock reads synchronise CUDA (CUDA is available)."""
        return self._sync is not None

    def phase(self, name: str) -> Any:
        """Context manager timing ``name`` (synchronised where CUDA exists)."""
        if self._sync is None:
            return self.profiler.phase(name)
        return CudaPhase(self.profiler, name, self._device)

    def timed(self, name: str) -> Callable[[F], F]:
        """Decorator timing every call of a function as phase ``name`` (synchronised)."""
        self.profiler.id(name)

        def deco(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.phase(name):
                    return fn(*args, **kwargs)

            return wrapper  # type: ignore[return-value]

        return deco

    def __getattr__(self, name: str) -> Any:
        return getattr(self.profiler, name)

    def __repr__(self) -> str:
        mode = "synchronised" if self._sync is not None else "no CUDA: plain"
        return f"SynchronizedProfiler({self.profiler!r}, {mode})"


def synchronized(prof: Profiler, device: Any = None) -> SynchronizedProfiler:
    """A view of ``prof`` that synchronises CUDA before every clock read (see the module doc)."""
    return SynchronizedProfiler(prof, device)


def synchronize_phases(prof: Profiler, names: Iterable[str], device: Any = None) -> dict[str, Any]:
    """``{name: cuda_phase(prof, name, device)}`` for several phases at once."""
    return {n: cuda_phase(prof, n, device) for n in names}
