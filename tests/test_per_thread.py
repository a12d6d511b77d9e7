"""per_thread=True: finished threads' recorders are folded into one retired record."""

from __future__ import annotations

import gc
import threading

import psutil
import pytest

import gyreprof as gp


def _short_thread(prof: gp.Profiler, steps: int) -> None:
    for _ in range(steps):
        prof.begin()
        prof.lap(0)
        prof.lap(1)
    prof.end()
    prof.count("done")


@pytest.mark.slow  # several seconds: run by .ci/run's second step
def test_two_thousand_short_threads_keep_memory_bounded_and_every_event() -> None:
    prof = gp.Profiler(["env", "fwd"], per_thread=True)
    proc = psutil.Process()
    _short_thread(prof, 1)  # this thread's recorder stays alive throughout
    gc.collect()
    rss0 = proc.memory_info().rss
    n_threads, steps, batch = 2000, 5, 8
    for _ in range(0, n_threads, batch):
        ts = [threading.Thread(target=_short_thread, args=(prof, steps)) for _k in range(batch)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    gc.collect()
    growth = proc.memory_info().rss - rss0
    # each recorder holds ~2.5 MB (ring + histograms): 2,000 kept would be ~5 GB
    assert len(prof.recorders) <= 1 + 2 * batch + 8, len(prof.recorders)
    assert growth < 400 * 2**20, f"RSS grew {growth / 2**20:.0f} MiB"
    s = prof.summary()
    total = n_threads * steps + 1
    assert s.steps == total
    assert s.phases["env"].count == total and s.phases["fwd"].count == total
    assert prof.snapshot().counters["done"] == n_threads + 1


def test_a_retired_thread_counts_once_even_while_read_concurrently() -> None:
    prof = gp.Profiler(["env", "fwd"], per_thread=True)
    stop = threading.Event()
    seen: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(prof.summary().steps)

    r = threading.Thread(target=reader)
    r.start()
    for _ in range(40):
        ts = [threading.Thread(target=_short_thread, args=(prof, 3)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    stop.set()
    r.join()
    assert prof.summary().steps == 40 * 4 * 3
    assert all(0 <= v <= 480 for v in seen)
    assert seen == sorted(seen)  # never double-counted, never lost, while folding


def test_autosave_includes_retired_threads(tmp_path) -> None:
    out = tmp_path / "threads.snap"
    prof = gp.Profiler(["env", "fwd"], per_thread=True, autosave=str(out))
    for _ in range(30):
        t = threading.Thread(target=_short_thread, args=(prof, 2))
        t.start()
        t.join()
    assert prof.save_autosave() == out
    s = gp.Snapshot.from_bytes(out.read_bytes()).summary()
    assert s.steps == 60 and s.phases["fwd"].count == 60


def test_autosave_before_any_thread_wrote_keeps_the_layout(tmp_path) -> None:
    out = tmp_path / "empty.snap"
    prof = gp.Profiler(["env"], per_thread=True, significant_figures=2, autosave=str(out))
    assert prof.save_autosave() == out
    snap = gp.Snapshot.from_bytes(out.read_bytes())
    assert snap.layout == prof.snapshot().layout and snap.layout[2] == 2
    assert snap.summary().steps == 0
