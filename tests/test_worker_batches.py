"""A worker's own batches (``integrations._auto.batches.collecting``: a Ray actor's
method call), in a real process under ``gyreprof run``: each call of a thread that does
not train is one batch, its wall time counted; a call during which the thread steps an
optimizer (a learner's update) is none, and neither is any call after it (the thread
trains). The Ray wiring itself runs in ``test_ray_cluster.py``'s verl-style job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.run_scripts.runhelp import gyreprof_run

pytest.importorskip("torch")

SCRIPT = """
import json, time
import torch
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto.batches import collecting
from gyreprof.model.summary import COLLECT_COUNTER_PREFIX as P

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def generate():
    time.sleep(0.02)

def learn():
    opt.zero_grad()
    model(torch.ones(8, 4)).sum().backward()
    opt.step()

for _ in range(3):
    collecting(generate)
collecting(learn)
collecting(generate)
counters = st.thread_state().sampler.snapshot().counters
print("COUNTERS " + json.dumps({k[len(P):]: v for k, v in counters.items() if k.startswith(P)}))
"""


def test_a_learners_call_is_no_batch(tmp_path: Path) -> None:
    path = tmp_path / "worker.py"
    path.write_text(SCRIPT)
    proc, _ = gyreprof_run(tmp_path, sys.executable, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTERS "))
    got = json.loads(line[len("COUNTERS ") :])
    assert got["batches"] == 3, got  # the 3 generate calls before the thread trained
    assert got["wall_ns"] >= 3 * 20_000_000, got  # their sleeps, at least
