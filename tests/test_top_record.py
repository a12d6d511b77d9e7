"""``gyreprof top --json`` writes a typed gyreprof.top/1 record through gyreprof.model._serial."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import gyreprof as gp
from gyreprof.live import _layout as lay
from gyreprof.live._top import TopModel, TopRecord
from gyreprof.model._serial import SerialError, decode, loads


def test_a_refresh_round_trips_and_reads_back_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(lay.ENV_DIR, str(tmp_path))
    prof = gp.Profiler(["env", "fwd"], live=True)
    model = TopModel(os.getpid())
    model.refresh()  # the first refresh has no window yet
    for _ in range(50):
        prof.begin()
        with prof.phase("env"):
            pass
        with prof.phase("fwd"):
            pass
    prof.end()
    frame = model.refresh()
    record = frame.record()
    text = json.dumps(frame.to_dict())
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert data["format"] == "gyreprof.top/1"
    assert [p["pid"] for p in data["processes"]] == [os.getpid()]
    back = loads(TopRecord, text)
    assert back.processes == record.processes and back.merged == record.merged
    view = back.processes[0]
    assert view.since_start is not None and view.since_start.steps == 50
    assert view.last_window is not None and view.last_window.interval_s is not None
    assert view.since_start.interval_s is None  # since start is not a window
    assert view.since_start.step.share is None and view.since_start.phases["env"].share
    assert all(
        v is None or math.isfinite(v)
        for v in (view.since_start.step.mean_ns, view.since_start.steps_per_s)
    )
    # a consumer that gets a damaged line learns what is wrong, as a ValueError
    data["processes"][0]["since_start"]["phases"]["env"]["count"] = "50"
    with pytest.raises(SerialError, match=r"\.processes\[0\]\.since_start\.phases\['env'\]\.count"):
        decode(TopRecord, data)
    prof.live.close()
