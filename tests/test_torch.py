"""torch integration: adds nothing on CPU-only machines; synchronises CUDA where there is one."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

import gyreprof as gp  # noqa: E402
from gyreprof.analysis.verdict import diagnose  # noqa: E402
from gyreprof.integrations.torch import (  # noqa: E402
    CudaPhase,
    SynchronizedProfiler,
    cuda_available,
    cuda_phase,
    is_synchronized,
    mark_synchronized,
    synchronized,
    synchronized_phases,
)

MS = 1_000_000
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


def policy() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def test_cuda_available_matches_torch() -> None:
    assert cuda_available() == HAS_CUDA


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU-only behaviour")
def test_cpu_only_adds_nothing() -> None:
    prof = gp.Profiler(["fwd", "xfer"])
    timer = cuda_phase(prof, "fwd")
    assert timer is prof.phase("fwd")  # the profiler's own timer, no wrapper
    # code written for a GPU box (device=local_rank) still runs on the CPU build
    assert cuda_phase(prof, "fwd", device=0) is prof.phase("fwd")
    assert synchronized(prof, device=0).lap is prof.lap
    sp = synchronized(prof)
    assert not sp.synchronizes
    assert sp.lap is prof.lap and sp.begin is prof.begin and sp.end is prof.end
    assert sp.phase("xfer") is prof.phase("xfer")
    net = policy()
    x = torch.randn(16, 8)
    with torch.no_grad():
        for _ in range(20):
            with timer:
                net(x)
    s = prof.summary()
    assert s.phases["fwd"].count == 20
    assert s.phases["xfer"].count == 0
    assert s.counters == {}
    assert s.events == 20  # nothing recorded beyond the phases timed


def test_synchronized_view_times_a_real_loop() -> None:
    prof = gp.Profiler(["fwd", "xfer"], warmup_steps=2)
    sp = synchronized(prof)
    fwd, xfer = sp.ids("fwd", "xfer")
    net = policy()
    x = torch.randn(64, 8)
    out = torch.empty(64, 2)
    sp.lap(xfer)  # sets the first boundary
    with torch.no_grad():
        for _ in range(30):
            sp.begin()
            y = net(x)
            sp.lap(fwd)
            out.copy_(y)
            time.sleep(0.001)
            sp.lap(xfer)
    sp.end()
    s = sp.summary()  # delegated to the profiler
    assert s.steps == 28
    assert s.phases["fwd"].count == 28
    assert s.phases["xfer"].p50 >= 0.8 * MS
    assert synchronized_phases(prof) == {"fwd", "xfer"}
    assert "SynchronizedProfiler" in repr(sp)


def test_timed_decorator_and_cuda_phase_class() -> None:
    prof = gp.Profiler(["fwd"])
    sp = SynchronizedProfiler(prof)
    net = policy()

    @sp.timed("fwd")
    def act(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return net(x).argmax(dim=1)

    for _ in range(5):
        assert act(torch.randn(4, 8)).shape == (4,)
    assert prof.summary().phases["fwd"].count == 5
    cp = CudaPhase(prof, "fwd")
    assert cp.synchronizes == HAS_CUDA
    with cp, cp:  # nestable like prof.phase
        pass
    assert prof.summary().phases["fwd"].count == 7


def test_errors_name_the_problem() -> None:
    prof = gp.Profiler(["fwd"])
    with pytest.raises(ValueError, match=r"unknown phase 'bwd'; known phases: \['fwd'\]"):
        cuda_phase(prof, "bwd")
    with pytest.raises(ValueError, match="must be a CUDA device"):
        cuda_phase(prof, "fwd", device="cpu")
    with pytest.raises(ValueError, match="must be a CUDA device"):
        synchronized(prof, device="not-a-device")
    with pytest.raises(TypeError, match="expected a gyreprof Profiler"):
        synchronized(prof.summary())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown phase"):
        mark_synchronized(prof, "nope")
    with pytest.raises(ValueError, match="unknown phase 'bwd'"):
        synchronized(prof).timed("bwd")


def test_verdict_knows_which_phases_were_synchronised() -> None:
    tp = gp.Profiler(["wait", "fwd", "bwd"])
    with cuda_phase(tp, "fwd"):
        pass
    assert is_synchronized(tp, "fwd") and not is_synchronized(tp, "bwd")
    for _ in range(20):
        tp.begin()
        tp.record("wait", MS)
        tp.record("fwd", MS)
        tp.record("bwd", MS)
    tp.end()
    v = diagnose(trainer=tp, compute="fwd", gpu=True)
    gpu = [c for c in v.caveats if "synchronising" in c]
    assert len(gpu) == 1 and "['bwd']" in gpu[0]
    mark_synchronized(tp, "bwd")
    v2 = diagnose(trainer=tp, compute="fwd", gpu=True)
    assert not any("synchronising" in c for c in v2.caveats)


@needs_cuda
def test_cuda_phase_holds_the_gpu_work() -> None:
    prof = gp.Profiler(["launch", "gpu"])
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    for _ in range(3):  # warm the kernels up
        a @ a
    torch.cuda.synchronize()
    gpu_ms = []
    for _ in range(10):
        torch.cuda.synchronize()
        with prof.phase("launch"):  # unsynchronised: only the launch
            a @ a
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with cuda_phase(prof, "gpu"):
            start.record()
            a @ a
            stop.record()
        gpu_ms.append(start.elapsed_time(stop))
    s = prof.summary()
    kernel_ns = sorted(gpu_ms)[len(gpu_ms) // 2] * 1e6
    assert s.phases["gpu"].p50 >= 0.8 * kernel_ns
    assert s.phases["gpu"].p50 > s.phases["launch"].p50


@needs_cuda
def test_synchronized_lap_on_cuda() -> None:
    prof = gp.Profiler(["fwd", "rest"])
    sp = synchronized(prof, device=0)
    assert sp.synchronizes
    a = torch.randn(2048, 2048, device="cuda")
    fwd, rest = sp.ids("fwd", "rest")
    for _ in range(10):
        sp.begin()
        a @ a
        sp.lap(fwd)
        sp.lap(rest)
    sp.end()
    s = prof.summary()
    assert s.phases["fwd"].count == 10
    assert s.phases["fwd"].p50 > s.phases["rest"].p50
    with pytest.raises(ValueError, match="does not exist"):
        synchronized(prof, device=torch.cuda.device_count())
