"""Type stubs for gyreprof._core.recorder (compiled)."""

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

# the stats block's words: recorder.pxd declares them (cpdef enum); gyreprof._support.block reads them
LAYOUT_VERSION: int
H_STEP: int
H_OPEN_PHASE: int
H_OPEN_SINCE: int
H_RING_HEAD: int
H_STEP_START: int
H_NEGATIVE: int
H_OUT_OF_RANGE: int
H_START: int
H_STEPS_DONE: int
H_NONFINITE: int
H_SATURATED: int
H_WIN_SEQ: int
H_N_TIMER: int
H_N_TIMED: int
H_N_RECORD: int
H_CLOCK_CHECKS: int
H_CLOCK_RECAL: int
H_CLOCK_FALLBACK: int
H_CLOCK_ERROR_PPM: int
H_SUM_HI: int
SUMHI_STAT: int
SUMHI_WARM: int
SUMHI_FIELDS: int
H_STEADY_START: int
H_WARMUP_STEPS: int
H_LAST_STEP_END: int
H_WINDOWS: int
H_WIN_STEPS: int
H_WIN_START: int
H_WIN_FIRST_STEP: int
H_LAST_WRITE: int
H_WARMUP_END_STEP: int
HEADER_WORDS: int
HOT_WORDS: int
HOT_FIRST: int
HOT_STAT: int
HOT_WIN: int
STAT_COUNT: int
STAT_SUM: int
STAT_MIN: int
STAT_MAX: int
STAT_FIELDS: int
WCUR_MIN: int
WCUR_SUM: int
WCUR_MAX: int
WCUR_FIELDS: int
WARM_COUNT: int
WARM_SUM: int
WARM_MAX: int
WARM_FIELDS: int
WIN_START: int
WIN_END: int
WIN_FIRST_STEP: int
WIN_STEPS: int
WIN_WARMUP: int
WIN_HEADER: int
WIN_COUNT: int
WIN_SUM: int
WIN_MAX: int
WIN_P50: int
WIN_P90: int
WIN_P99: int
WIN_FIELDS: int
WINDOW_SIGNIFICANT_FIGURES: int
FORM_LAP: int
FORM_TIMER: int
FORM_TIMED: int
FORM_RECORD: int
FOLD_BATCH: int
EVENT_DTYPE: np.dtype[Any]

def stats_layout(
    n_phases: int, counts_len: int, window_counts_len: int, max_windows: int, max_counters: int
) -> dict[str, int]: ...
def tsc_invariant() -> bool: ...
def kernel_clocksource(path: str = ...) -> str | None: ...
def tsc_trusted(clocksource_path: str = ...) -> bool: ...
def calibrate_tsc(duration_s: float = ...) -> tuple[float, int, int]: ...
def monotonic_ns() -> int: ...

class PhaseTimer:
    def __enter__(self) -> PhaseTimer: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]: ...

class TimedFunction:
    fn: Any
    def __init__(self, timer: PhaseTimer, fn: Any) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: object, objtype: type | None = ...) -> Any: ...

class Recorder:
    n_phases: int
    form_cost_ns: dict[str, float] | None
    capacity: int
    window_steps: int
    max_windows: int
    max_counters: int
    warmup_steps: int
    warmup_ns: int
    use_tsc: bool
    offsets: dict[str, int]
    def __init__(
        self,
        n_phases: int,
        capacity: int = ...,
        *,
        significant_figures: int = ...,
        lowest_ns: int = ...,
        highest_ns: int = ...,
        warmup_steps: int = ...,
        warmup_ns: int = ...,
        window_steps: int = ...,
        max_windows: int = ...,
        max_counters: int = ...,
        clock: str = ...,
        buffer: Any = ...,
    ) -> None: ...
    @staticmethod
    def required_bytes(
        n_phases: int,
        *,
        significant_figures: int = ...,
        lowest_ns: int = ...,
        highest_ns: int = ...,
        max_windows: int = ...,
        max_counters: int = ...,
    ) -> int: ...
    def rebind(self, buffer: Any = ...) -> None: ...
    def reset(self) -> None: ...
    def now_ns(self) -> int: ...
    def begin(self) -> None: ...
    def end(self) -> None: ...
    def lap(self, phase: int, /) -> None: ...
    def begin_at(self, now_ns: int, /) -> None: ...
    def end_at(self, now_ns: int, /) -> None: ...
    def lap_at(self, phase: int, now_ns: int, /) -> None: ...
    def record_span(self, phase: int, start_ns: int, end_ns: int, /) -> None: ...
    def mark_since(self) -> None: ...
    def since_mark_ns(self) -> int: ...
    def last_write_ns(self) -> int: ...
    def record(self, phase: int, duration_ns: float | int) -> None: ...
    def count(self, slot: int, n: int = ...) -> None: ...
    def timer(self, phase: int, /) -> PhaseTimer: ...
    clock_requested: str
    def check_clock(self, *, min_span_s: float = ...) -> bool: ...
    def clock_health(self) -> dict[str, Any]: ...
    def _set_clock_check_interval(self, seconds: float, /) -> None: ...
    def _inject_tsc_error(self, relative: float, /) -> None: ...
    def release_writer(self) -> None: ...
    @property
    def writer_token(self) -> int: ...
    def stats_array(self) -> npt.NDArray[np.int64]: ...
    def stats_view(self) -> npt.NDArray[np.int64]: ...
    def flush(self) -> None: ...
    def events(self) -> npt.NDArray[Any]: ...
    @property
    def overwritten(self) -> int: ...
    @property
    def in_warmup_now(self) -> bool: ...
    @property
    def clock(self) -> str: ...
    def progress(self) -> tuple[int, int, int, int, int]: ...
    def config(self) -> dict[str, Any]: ...

class Spans:
    """Overlapping spans written into a Recorder, with its thread's in-flight count."""

    in_flight: int
    max_in_flight: int
    begun: int
    ended: int
    unmatched: int
    first_ns: int
    def __init__(self, rec: Recorder) -> None: ...
    def begin(self) -> int: ...
    def end(self, phase: int, start_ns: int) -> int: ...
    def gauge(self) -> dict[str, Any]: ...
