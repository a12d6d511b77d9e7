"""The calling thread's state under ``gyreprof run``: :class:`ThreadState`, the patched
methods' per-thread profilers and phase timers on top of the thread's training timeline
(``timeline.Timeline``; ``state``'s module doc says what the timeline means). Its own
module because it needs the compiled core: ``state`` (imported by the bootstrap of every
process) imports this only when a thread first records, so a process that records
nothing loads neither numpy nor the core."""

from __future__ import annotations

import threading
from typing import Any

from gyreprof._core.guard import Binding
from gyreprof.integrations._auto import records as rec
from gyreprof.integrations._auto.timeline import Timeline

FWD = rec.SAMPLER_PHASES.index("fwd")  # sampler phase id of the policy forward


class ThreadState(Timeline):
    """One thread's profilers and phase timers (what the patched methods touch), and the
    state of its training timeline (see the module doc). The timeline's fields and its
    per-wait work (``data_wait``, the block close) are the base class's
    (``timeline.Timeline``): ``srec``, ``trec``, ``trainer``, ``ident``, ``trains``,
    ``framework``, ``in_wait``, ``step_open``, ``prev_end``, ``blk_start``, ``blk_end``,
    ``blk_own``, ``pend_start``, ``pend_end``, ``blocks``, ``provisional``, ``last_start``,
    ``last_own`` and ``fwd_id``."""

    __slots__ = (
        "guard_binding",
        "in_collect",
        "in_rollout",
        "in_fwd",
        "rolled",
        "batches",
        "in_train",
        "sampler",
        "env_step",
        "env_reset",
        "step_async",
        "step_wait",
        "fwd",
        "tbegin",
        "tlap",
        "tend",
        "now",
        "thread",
        "upd_end",
        "ng_depth",
        "ng_start",
        "ng_lw",
        "ng_dirty",
        "gf_pre",
        "gf_post",
        "gf_module",
        "gf_start",
        "gf_lw",
    )

    def __init__(self, sampler: Any, trainer: Any) -> None:
        super().__init__()
        # the recorders, the trainer's counters, the forward's phase id and the thread
        self.bind(sampler.recorder, trainer.recorder, trainer, FWD, threading.get_ident())
        self.in_collect = False
        self.in_train = False
        # inside a collector's own rollout (a TorchRL worker's batch): the stack sampler
        # charges what is neither an env call nor the timed policy forward (``in_fwd``)
        self.in_rollout = False
        self.in_fwd = False
        self.rolled = False  # it collected a batch of its own (in_rollout) at least once
        self.in_wait = False  # inside a data wait already reported (nested gets are not)
        self.sampler = sampler
        ph = sampler.phase
        self.env_step = ph("env_step")
        self.env_reset = ph("env_reset")
        self.step_async = ph("step_async")
        self.step_wait = ph("step_wait")
        # what the C env-call guard reads of this thread: the nesting flag and the timers
        self.guard_binding = Binding(self.env_step, self.env_reset, self.step_async, self.step_wait)
        self.fwd = ph("fwd")
        self.tbegin = trainer.begin
        self.tlap = trainer.lap
        self.tend = trainer.end  # a trainer step is one wait + one compute, closed after compute
        self.now = self.srec.now_ns  # the clock every timeline timestamp is read from
        self.thread = threading.current_thread()
        self.trains = False  # saw an update signal
        self.framework = False  # a framework patch (SB3) marks this thread's steps itself
        self.step_open = False  # a trainer step begun (its wait closed, compute running)
        self.prev_end = -1  # end of the last collect block (where compute began)
        self.upd_end = -1  # end of the last update (optimizer post-hook, backward end)
        self.blk_start = -1  # data waits / own sampling spans since the last update
        self.blk_end = -1
        self.blk_own = False  # one of them was the thread's own sampling
        self.ng_depth = 0  # torch.no_grad / inference_mode nesting
        self.ng_start = -1
        self.ng_lw = 0  # the sampler's last write when the outermost block began
        self.ng_dirty = False  # the open block held an update signal: not a forward
        # the first module call after an update, with grad on (libs.torch): its hooks'
        # handles while armed, the module whose call it is, when it began and the
        # sampler's last write then
        self.batches: Any = None  # its batches.Batches, made at its first (a Ray worker's call)
        self.gf_pre: Any = None
        self.gf_post: Any = None
        self.gf_module: Any = None
        self.gf_start = -1
        self.gf_lw = 0
        self.pend_start = -1  # the last outermost no-grad block, not classified yet
        self.pend_end = -1
        self.blocks = 0  # collect blocks closed into trainer steps
        self.provisional = False  # its steps so far are the default trainer's (no update yet)
        self.last_start = -1  # the last collect block's start and kind
        self.last_own = False

    @property
    def inside(self) -> bool:
        """The nesting guard: inside an env call already timed (``guard_binding``'s flag,
        which the C guard reads and sets)."""
        return self.guard_binding.inside

    @inside.setter
    def inside(self, value: bool) -> None:
        self.guard_binding.inside = value

    def _trim_start_up(self, start: int, end: int) -> int:
        """The first collect block's start, called by the block close
        (``Timeline.close_block``). The first block of a thread reaches back to its first sampler
        write, which may come before the set-up (an env reset, then the model built): start
        it after the last gap between its events that is longer than all that follows it
        (read once per thread from the sampler's ring)."""
        try:
            ev = self.srec.events()
        except Exception:  # noqa: BLE001 - the untrimmed start is still a start
            return start
        ev = ev[(ev["phase"] >= 0) & (ev["start_ns"] >= start)]
        spans = sorted(
            (int(a), int(a) + int(d))
            for a, d in zip(ev["start_ns"], ev["duration_ns"], strict=True)
        )
        if self.blk_end >= 0:
            spans.append((self.blk_start, self.blk_end))
            spans.sort()
        covered = -1
        for a, b in spans:
            if covered >= 0 and a - covered > end - a:
                start = a
            covered = max(covered, b)
        return start
