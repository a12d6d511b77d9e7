"""The trainer timeline's per-wait work (``integrations/_auto/timeline.py``, the base of
``ThreadState``): ns of thread CPU time per call, the least of 7 runs of 20,000 calls each (thread CPU
time: a preemption on a loaded machine is not in it).

    python benchmarks/bench_timeline.py

- ``waits_count``: the gate every data-wait wrapper asks (here on the default trainer);
- ``data_wait`` on a thread that trains: the block widened, nothing closed;
- ``data_wait`` on the default trainer: every wait closes a block into a trainer step
  (three ``*_at`` writes, a counter, the sampler's mark);
- ``request_wait`` on the default trainer: the same behind the request's gate;
- ``state.waiting_thread()``: the module-level gate the queue and future patches call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gyreprof.integrations._auto import records as rec
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto.thread_state import ThreadState
from gyreprof.recording.profiler import Profiler

N = 20_000


def _state() -> ThreadState:
    s = Profiler(rec.SAMPLER_PHASES, capacity=1 << 12, label="bench-timeline")
    t = Profiler(rec.TRAINER_PHASES, capacity=1 << 12, window_steps=1, label="bench-timeline")
    return ThreadState(s, t)


def _ns_per_call(fn: Callable[[int], None]) -> float:
    res = []
    for r in range(7):
        t0 = time.thread_time_ns()
        fn(r * N)
        res.append((time.thread_time_ns() - t0) / N)
    return min(res)


def main() -> None:
    me = threading.get_ident()
    gate = _state()
    training = _state()
    training.trains = True
    default = _state()
    request = _state()
    base = default.now()

    def waits_count(_: int) -> None:
        for _i in range(N):
            gate.waits_count(me)

    def wait_training(j: int) -> None:
        for i in range(j, j + N):
            training.data_wait(base + i, base + i + 1, False, me)

    def wait_default(j: int) -> None:
        for i in range(j, j + N):
            default.data_wait(base + 10 * i, base + 10 * i + 5, False, me)

    def request_default(j: int) -> None:
        for i in range(j, j + N):
            request.request_wait(base + 10 * i, base + 10 * i + 5, me)

    def waiting_thread(_: int) -> None:
        for _i in range(N):
            st.waiting_thread()

    st.tls.t = gate
    st._default_main = me
    for label, fn in (
        ("waits_count (default trainer)", waits_count),
        ("data_wait, training thread (no close)", wait_training),
        ("data_wait, default trainer (block close)", wait_default),
        ("request_wait, default trainer (close)", request_default),
        ("state.waiting_thread()", waiting_thread),
    ):
        print(f"{label:42s} {_ns_per_call(fn):7.0f} ns")


if __name__ == "__main__":
    main()
