"""Issue 38 item 5: two hand Profilers stepped on one thread. The time inside the other
Profiler's phases (a trainer's ``compute`` stepped between sampler steps) is that
Profiler's, never the sampler's untimed time; untimed work of the sampler's own stays
untimed, and Profilers on two threads are left alone."""

from __future__ import annotations

import threading
import time

import gyreprof as gp

UNTIMED = "(untimed)"


def spin(s: float) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < s:
        pass


def _one_thread(extra_s: float = 0.0) -> tuple[gp.Profiler, gp.Profiler]:
    """A synchronous loop: the sampler's steps inside the trainer's wait, then its compute;
    ``extra_s`` of untimed sampler work in each step (a buffer write)."""
    sp = gp.Profiler(["env", "fwd"])
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(30):
        with tp.phase("wait"):
            for _ in range(10):
                sp.begin()
                with sp.phase("env"):
                    spin(0.0003)
                with sp.phase("fwd"):
                    spin(0.0001)
                spin(extra_s)
        with tp.phase("compute"):
            spin(0.004)
    sp.end()
    return sp, tp


def test_the_other_profilers_compute_is_not_the_samplers_untimed_time() -> None:
    sp, tp = _one_thread()
    v = gp.diagnose(sampler=sp, trainer=tp)
    # each step after a compute spans it: 50% of the steps' time, all of it the trainer's
    assert v.sampler_shares[UNTIMED] < 0.08, v.sampler_shares
    assert v.dominant_phase == "env"
    assert v.sampler_wall is not None and "'compute' on the same thread" in v.sampler_wall
    assert v.loop == "sync"


def test_the_samplers_own_untimed_work_stays_untimed() -> None:
    sp, tp = _one_thread(extra_s=0.0004)  # as long as env + fwd: about half untimed
    v = gp.diagnose(sampler=sp, trainer=tp)
    assert 0.35 < v.sampler_shares[UNTIMED] < 0.65, v.sampler_shares
    # the wait holds the sampler's work: only the compute is left out
    assert v.sampler_wall is not None and "'wait'" not in v.sampler_wall


def test_profilers_on_two_threads_are_left_alone() -> None:
    sp = gp.Profiler(["env"])
    tp = gp.Profiler(["wait", "compute"])
    stop = threading.Event()

    def train() -> None:
        while not stop.is_set():
            with tp.phase("wait"):
                time.sleep(0.0005)
            with tp.phase("compute"):
                time.sleep(0.002)

    th = threading.Thread(target=train)
    th.start()
    try:
        for _ in range(300):
            sp.begin()
            with sp.phase("env"):
                spin(0.0002)
            spin(0.0002)  # untimed, on the sampler's own thread
        sp.end()
    finally:
        stop.set()
        th.join()
    v = gp.diagnose(sampler=sp, trainer=tp)
    # the trainer computes while the sampler steps, on another thread: nothing is its
    assert 0.3 < v.sampler_shares[UNTIMED] < 0.7, v.sampler_shares
    assert v.sampler_wall == "its marked steps"
