"""Type stubs for gyreprof._core.timeline (compiled)."""

from typing import Any

from gyreprof._core.recorder import Recorder

class Timeline:
    srec: Recorder
    trec: Recorder
    trainer: Any
    ident: int
    trains: bool
    framework: bool
    in_wait: bool
    step_open: bool
    blk_own: bool
    provisional: bool
    last_own: bool
    prev_end: int
    blk_start: int
    blk_end: int
    pend_start: int
    pend_end: int
    blocks: int
    last_start: int
    def bind(self, srec: Recorder, trec: Recorder, trainer: Any, fwd: int, ident: int) -> None: ...
    def waits_count(self, default_main: int) -> bool: ...
    def data_wait(self, start_ns: int, end_ns: int, own: bool, default_main: int) -> None: ...
    def request_wait(self, start_ns: int, end_ns: int, default_main: int) -> None: ...
    def close_block(self) -> None: ...
    def classify(self) -> None: ...
    def _trim_start_up(self, start: int, end: int) -> int: ...
