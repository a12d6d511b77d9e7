"""Batches of rollout requests: the groups a trainer waits on together, and their tail.

From recorded groups (``analysis.rollouts.Group``) first: two batches in flight at the
same time in two threads are one busy period (the fallback rule) but two groups; a
gather inside a gather is the outer one's. Then real runs under ``gyreprof run``
against the local server with one known slow request per batch (``asyncio.gather``,
``asyncio.wait``, ``TaskGroup``, ``ThreadPoolExecutor.map``, ``as_completed``): each
batch's rule, size, slowest request, and tail share against the script's own clock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gyreprof._support.errors import CorruptDataError
from gyreprof.analysis import rollouts as ar

from helpers.spans import span_row

MS = 1_000_000


def span(start_ms: float, end_ms: float, thread: int = 1, pid: int = 7) -> ar.SpanRow:
    return span_row(
        "http://h:1/v1/chat/completions",
        int(start_ms * MS),
        int(end_ms * MS),
        prompt_tokens=3,
        completion_tokens=4,
        bytes_in=10,
        bytes_out=10,
        thread=thread,
        client="httpx",
        pid=pid,
    )


def group(rule: str, a_ms: float, b_ms: float, threads: tuple[int, ...], pid: int = 7) -> ar.Group:
    return ar.Group(rule, pid, int(a_ms * MS), int(b_ms * MS), 0, threads)


def test_two_concurrent_gathers_in_two_threads_are_two_batches_not_one_busy_period() -> None:
    # thread 1: 10 requests 0..100 ms, one of them to 400 ms; thread 2: 10 requests
    # 50..150 ms. One busy period 0..400 (20 requests); two groups.
    a = [span(0, 100, 1) for _ in range(9)] + [span(0, 400, 1)]
    b = [span(50, 150, 2) for _ in range(10)]
    busy = ar.analyse(a + b)
    assert busy is not None and busy.batch_count == 1
    assert busy.batches[0].requests == 20 and busy.batch_rules == {"busy period": 1}
    r = ar.analyse(a + b, None, [group("asyncio.gather", 0, 401, (1,)), group("x", 50, 151, (2,))])
    assert r is not None and r.batch_count == 2
    assert r.batch_rules == {"asyncio.gather": 1, "x": 1}
    first = next(x for x in r.batches if x.rule == "asyncio.gather")
    assert (first.requests, first.tail_requests) == (10, 1)
    assert first.tail_share == pytest.approx(300 / 400)  # after the 9th came back at 100
    assert first.slowest_ms == pytest.approx(400) and first.median_ms == pytest.approx(100)
    assert first.words == "the batch waited 75% of its time for its last 1 of 10 requests"
    second = next(x for x in r.batches if x.rule == "x")
    assert second.requests == 10 and second.tail_share == pytest.approx(0.0)


def test_a_request_inside_nested_groups_is_the_outermost_ones() -> None:
    spans = [span(1, 10), span(2, 12), span(20, 30), span(21, 31)]
    groups = [group("inner", 0, 13, (1,)), group("outer", 0, 40, (1,))]
    held, rest = ar.grouped(spans, groups)
    assert [(g.rule, len(m)) for g, m in held] == [("outer", 4)] and rest == []


def test_requests_in_no_group_fall_back_to_busy_periods() -> None:
    grouped_ = [span(0, 10), span(0, 12)]
    loose = [span(100, 110), span(105, 115)]
    other_pid = [span(0, 10, pid=8), span(1, 11, pid=8)]  # a group holds only its process
    r = ar.analyse(grouped_ + loose + other_pid, None, [group("asyncio.gather", 0, 13, (1,))])
    assert r is not None
    assert r.batch_rules == {"busy period": 2, "asyncio.gather": 1}


def test_a_group_of_any_thread_and_a_span_past_its_end() -> None:
    spans = [span(0, 10, 3), span(0, 11, 4), span(0, 50, 5)]  # the last ends after it
    held, rest = ar.grouped(spans, [group("futures.wait", 0, 20, ())])
    assert len(held) == 1 and len(held[0][1]) == 2 and len(rest) == 1


def test_the_record_carries_its_groups_and_refuses_bad_ones() -> None:
    from gyreprof.integrations._auto import rollout_record as rr

    rec = rr.RolloutRecord(
        pid=7,
        fields=list(ar.SPAN_FIELDS),
        spans=[],
        groups=[["asyncio.gather", 1, 5, 2, [11]]],
    )
    back = rr.RolloutRecord.from_json(rec.to_json())
    assert back.group_rows() == [ar.Group("asyncio.gather", 7, 1, 5, 2, (11,))]
    for bad in (["g", 5, 1, 2, []], ["g", 1, 5, 2, "x"], ["g", 1, True, 2, []], ["g", 1]):
        rec = rr.RolloutRecord(pid=7, fields=list(ar.SPAN_FIELDS), spans=[], groups=[bad])
        with pytest.raises(CorruptDataError):
            rr.RolloutRecord.from_json(rec.to_json()).group_rows()


# ----------------------------------------------------------------- real runs

STEPS = 4
SLOW_MS = 600


def _run(tmp_path: Path, mode: str, n: int, group_: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pytest.importorskip("httpx")
    pytest.importorskip("openai")
    pytest.importorskip("torch")
    from test_signals_asyncio import run_async

    own, data, err = run_async(tmp_path, mode, n, 40, 20, 0, SLOW_MS, group=group_, steps=STEPS)
    assert data["rollouts"] is not None, err[-3000:]
    return own, data


RULES = [
    ("tail", 32, "gather", "asyncio.gather"),
    pytest.param("tail", 16, "wait", "asyncio.wait", marks=pytest.mark.slow),
    pytest.param(
        "tail",
        16,
        "taskgroup",
        "asyncio.TaskGroup",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(sys.version_info < (3, 11), reason="TaskGroup: Python 3.11+"),
        ],
    ),
    ("map", 16, "gather", "ThreadPoolExecutor.map"),
    pytest.param("completed", 16, "gather", "as_completed", marks=pytest.mark.slow),
]


@pytest.mark.stacks
@pytest.mark.parametrize(("mode", "n", "group_", "rule"), RULES)
def test_a_batch_with_one_known_slow_request(
    tmp_path: Path, mode: str, n: int, group_: str, rule: str
) -> None:
    own, data = _run(tmp_path, mode, n, group_)
    r = data["rollouts"]
    assert r["batch_rules"] == {rule: STEPS + 1}, r["batch_rules"]
    k = max(1, n // 10)
    for b in r["batches"]:
        assert b["rule"] == rule and b["requests"] == n and b["tail_requests"] == k
        assert b["slowest_ms"] >= SLOW_MS * 0.95
        assert b["tokens"] == 4 * n
    mine = own["tails"]  # in the script's order: the warm-up batch first
    theirs = [b["tail_share"] for b in sorted(r["batches"], key=lambda b: b["start_ns"])]
    assert len(theirs) == len(mine) == STEPS + 1
    # the steady batches (the warm-up's first request pays the client's first-call
    # set-up before its span starts, not before the script's clock starts); the
    # script's clock reads each request's end after its await resumed: a little late
    for a, b in zip(mine[1:], theirs[1:], strict=True):
        assert b == pytest.approx(a, abs=0.1), (mine, theirs)
    theirs.sort()
    med = theirs[len(theirs) // 2]
    assert med > 0.4  # one slow request of n holds the batch
    assert f"for its last {k} of {n} requests" in r["typical_tail"]
    assert r["tail_dominates"] is True
    line = next(x for x in data["notes"] if x.startswith("rollouts: the trainer waits"))
    assert "the long tail dominates" in line and f"its {STEPS + 1} batches" in line
