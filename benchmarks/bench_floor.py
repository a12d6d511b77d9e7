"""The physical floor of a lap: gyreprof's hot path against a compiled clock read.

The *floor* is a compiled (Cython) method with the same call shape as
``Recorder.lap`` (one positional int, METH_O) whose body reads the same clock
and stores one word. It is built once per source/clock version into a private
cache directory (``$GYREPROF_BENCH_CACHE`` or ``$TMPDIR/gyreprof-floor-<uid>``)
by ``cythonize`` + ``build_ext`` in a subprocess. It cimports
``gyreprof._core.clock`` so it reads exactly the recorder's clock functions.

    python benchmarks/bench_floor.py            # full run (a few minutes)
    python benchmarks/bench_floor.py --quick    # smoke run (seconds)
    python benchmarks/bench_floor.py --json out.json

What it measures, every contender interleaved round by round in one run (each
round runs the contenders in a fresh random order):

* **lap / floor** for ``clock="monotonic"`` and ``clock="tsc"`` (TSC skipped
  where it is not invariant). Each call site makes four calls per loop
  iteration (``f(0); f(1); f(2); f(3)``), so the loop's own cost is a quarter
  of an iteration; an empty loop is timed in the same rounds and subtracted
  (``net``). Forms: ``lap`` (``lap = prof.lap``, int ids), ``step``
  (``begin(); lap(0); lap(1); lap(2)``, the documented sampler idiom), the
  floor, and ``time.perf_counter_ns`` for reference. Reported: min, lower
  quartile and median per-call cost; the ratio to the floor is the ratio of the
  lower quartiles over rounds (the least-disturbed runs: preemption on a shared
  machine only ever adds time), with a 95% bootstrap interval over rounds, plus
  the ratio of the minima and the median of per-round ratios. Runs are short
  (8000 calls, a few hundred us) so most of them fit between two preemptions.
* **scale**: cost per lap for 1..255 phases (laps cycle through every phase),
  for ring capacities 2**10..2**24 (the ring is written through once before
  timing, so every page is resident: the steady state), and with 16
  ``per_thread`` threads writing at full rate against one thread. Flatness is
  reported as ratios to the smallest case, with bootstrap intervals.

Absolute times on the shared 2-core guest wander by tens of percent; the
ratios, taken in the same rounds, are what to compare. No figure here is a
pass/fail assertion: the pytest-collected test checks only sanity.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import gyreprof as gp

# ---------------------------------------------------------------------------- the floor

_FLOOR_TEMPLATE = '''\
# cython: language_level=3, always_allow_keywords=False
"""The floor: read the recorder's clock, store one word (built by bench_floor.py)."""
import time
from libc.stdint cimport int64_t, uint64_t
{clock}

CLOCK_SOURCE = {source!r}
HAVE_TSC = bool(GYRE_HAVE_TSC)


cdef class Floor:
    """One clock read, one store; the same call shape as ``Recorder.lap`` (one
    positional int converted to long long).

    ``mono``: CLOCK_MONOTONIC ns. ``tsc``: the TSC converted to ns the way the
    recorder's ``clock="tsc"`` does (base + ticks * ns_per_tick, one multiply).
    ``tsc_raw``: the raw tick count, no conversion.
    """
    cdef int64_t last
    cdef double ns_per_tick
    cdef uint64_t tsc_base
    cdef int64_t tsc_base_ns

    def __cinit__(self):
        self.ns_per_tick = 0.0
        self.tsc_base = 0
        self.tsc_base_ns = 0

    def calibrate(self, double duration_s=0.02):
        """Measure ns per TSC tick against CLOCK_MONOTONIC over ``duration_s``."""
        cdef uint64_t t0 = gyre_rdtsc()
        cdef int64_t m0 = gyre_mono_ns()
        time.sleep(duration_s)
        cdef uint64_t t1 = gyre_rdtsc()
        cdef int64_t m1 = gyre_mono_ns()
        if t1 <= t0:
            raise ValueError("the TSC did not advance")
        self.ns_per_tick = (<double>(m1 - m0)) / (<double>(t1 - t0))
        self.tsc_base = t1
        self.tsc_base_ns = m1
        return self.ns_per_tick

    def mono(self, long long phase):
        self.last = gyre_mono_ns()

    def tsc(self, long long phase):
        self.last = self.tsc_base_ns + <int64_t>(
            <double>(<long long>(gyre_rdtsc() - self.tsc_base)) * self.ns_per_tick)

    def tsc_raw(self, long long phase):
        self.last = <int64_t>gyre_rdtsc()

    @property
    def value(self):
        return self.last
'''

_CLOCK_CIMPORT = "from gyreprof._core.clock cimport GYRE_HAVE_TSC, gyre_mono_ns, gyre_rdtsc"

_BUILD_SCRIPT = """\
import sys
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
src, tmp, name = sys.argv[1], sys.argv[2], sys.argv[3]
ext = Extension(name, [name + ".pyx"], include_dirs=[np.get_include()],
                extra_compile_args=["-O3"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
setup(
    script_args=["build_ext", "--inplace", "--build-temp", tmp],
    ext_modules=cythonize([ext], include_path=[src], quiet=True,
                          compiler_directives={"language_level": 3}),
)
"""

_FLOOR: ModuleType | None = None


def _src_root() -> Path:
    """The directory holding the imported ``gyreprof`` package (``src`` in a checkout)."""
    return Path(gp.__file__).resolve().parent.parent


def _cache_root() -> Path:
    env = os.environ.get("GYREPROF_BENCH_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"gyreprof-floor-{os.getuid()}"


def _build(source: str, src: Path, key: str, name: str = "_gyre_floor") -> Path:
    """Compile ``source`` as module ``name`` into ``<cache>/<key>/`` (atomically)."""
    final = _cache_root() / key
    if any(final.glob(f"{name}*.so")):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=final.parent))
    (work / f"{name}.pyx").write_text(source)
    (work / "build.py").write_text(_BUILD_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "build.py", str(src), str(work / "tmp"), name],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(
            f"building the floor failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    try:
        os.replace(work, final)
    except OSError:  # another run finished the same build first
        if not any(final.glob(f"{name}*.so")):
            raise
        return final
    return final


def load_floor() -> ModuleType:
    """The compiled floor module (built on first use, then cached by content hash)."""
    global _FLOOR
    if _FLOOR is not None:
        return _FLOOR
    import Cython

    src = _src_root()
    pxd = src / "gyreprof" / "_core" / "clock.pxd"
    if not pxd.is_file():  # shipped with the package: the floor reads the recorder's clock
        raise RuntimeError(f"no {pxd}: the floor cimports the recorder's clock functions")
    source = _FLOOR_TEMPLATE.format(
        clock=_CLOCK_CIMPORT, source=f"cimport gyreprof._core.clock ({pxd})"
    )
    h = hashlib.sha256()
    for part in (source, sys.version, str(getattr(Cython, "__version__", "")), pxd.read_text()):
        h.update(part.encode())
    _FLOOR = _load_so(_build(source, src, "floor-" + h.hexdigest()[:16]), "_gyre_floor")
    return _FLOOR


def _load_so(d: Path, name: str) -> ModuleType:
    so = next(d.glob(f"{name}*.so"))
    spec = importlib.util.spec_from_file_location(name, so)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_probe() -> ModuleType:
    """The bookkeeping-budget probe (``benchmarks/_floor_probe.pyx``), built like the floor."""
    import Cython

    source = (Path(__file__).resolve().parent / "_floor_probe.pyx").read_text()
    src = _src_root()
    pxd = src / "gyreprof" / "_core" / "clock.pxd"
    h = hashlib.sha256()
    for part in (source, sys.version, str(getattr(Cython, "__version__", "")), pxd.read_text()):
        h.update(part.encode())
    return _load_so(
        _build(source, src, "probe-" + h.hexdigest()[:16], "_floor_probe"), "_floor_probe"
    )


def tsc_usable() -> bool:
    """True where ``clock="tsc"`` works here (invariant TSC, calibration succeeds)."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return False
    if not {"constant_tsc", "nonstop_tsc"} <= flags:
        return False
    try:
        gp.Profiler(["a"], clock="tsc", capacity=16)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------- measurement


def run_rounds(
    contenders: dict[str, Callable[[], None]],
    calls: int,
    rounds: int,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Per-call ns of each contender in every round; a fresh random order each round.

    Each contender makes ``calls`` calls per run; the garbage collector is off while
    they run (a collection would land on whichever contender is running).
    """
    rng = np.random.default_rng(seed)
    names = list(contenders)
    out: dict[str, list[float]] = {n: [] for n in names}
    pc = time.perf_counter_ns
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for name in names:  # one untimed warm-up run each
            contenders[name]()
        for _ in range(rounds):
            for i in rng.permutation(len(names)):
                name = names[i]
                fn = contenders[name]
                t0 = pc()
                fn()
                out[name].append((pc() - t0) / calls)
    finally:
        if was:
            gc.enable()
    return {n: np.asarray(v) for n, v in out.items()}


def bootstrap_ci(
    stat: Callable[[np.ndarray], float],
    n_rounds: int,
    n_boot: int = 2000,
    seed: int = 1,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(idx)`` over rounds resampled with replacement."""
    rng = np.random.default_rng(seed)
    vals = np.empty(n_boot)
    for b in range(n_boot):
        vals[b] = stat(rng.integers(0, n_rounds, n_rounds))
    a = (1 - level) / 2
    lo, hi = np.quantile(vals, [a, 1 - a])
    return float(lo), float(hi)


def ratio_stats(
    num: np.ndarray,
    den: np.ndarray,
    num_base: np.ndarray | None = None,
    den_base: np.ndarray | None = None,
    n_boot: int = 2000,
    q: float = 0.25,
) -> dict[str, float]:
    """Ratio of low quantiles ``(Q(num) - Q(num_base)) / (Q(den) - Q(den_base))``.

    ``Q`` is the ``q``-quantile over rounds (default: the lower quartile, the
    least-disturbed runs, which preemption on a shared machine cannot lower); the
    bases (e.g. an empty loop timed in the same rounds) default to zero. The 95%
    interval is a percentile bootstrap over rounds (a resampled round keeps all its
    contenders). Also: the ratio of the minima and the median of per-round ratios.
    """
    zero = np.zeros_like(num)
    nb = zero if num_base is None else num_base
    db = zero if den_base is None else den_base

    def est(idx: np.ndarray | slice) -> float:
        qn, qnb, qd, qdb = np.quantile(np.stack([num[idx], nb[idx], den[idx], db[idx]]), q, axis=1)
        return float((qn - qnb) / (qd - qdb))

    lo, hi = bootstrap_ci(est, len(num), n_boot)
    return {
        "ratio": est(slice(None)),
        "ci_lo": lo,
        "ci_hi": hi,
        "min_ratio": float((num.min() - nb.min()) / (den.min() - db.min())),
        "paired_median": float(np.median((num - nb) / (den - db))),
    }


def loop4(f: Callable[[int], Any], m: int) -> Callable[[], None]:
    """``m`` iterations of ``f(0); f(1); f(2); f(3)``: four boundaries per iteration."""
    rep = itertools.repeat

    def run() -> None:
        for _ in rep(None, m):
            f(0)
            f(1)
            f(2)
            f(3)

    return run


def step4(begin: Callable[[], None], f: Callable[[int], Any], m: int) -> Callable[[], None]:
    """``m`` iterations of ``begin(); f(0); f(1); f(2)`` (the sampler idiom)."""
    rep = itertools.repeat

    def run() -> None:
        for _ in rep(None, m):
            begin()
            f(0)
            f(1)
            f(2)

    return run


def empty4(m: int) -> Callable[[], None]:
    rep = itertools.repeat

    def run() -> None:
        for _ in rep(None, m):
            pass

    return run


def _pc4(m: int) -> Callable[[], None]:
    pc = time.perf_counter_ns
    rep = itertools.repeat

    def run() -> None:
        for _ in rep(None, m):
            pc()
            pc()
            pc()
            pc()

    return run


# ------------------------------------------------------------------- lap vs floor


def bench_lap_vs_floor(calls: int, rounds: int, n_boot: int = 2000) -> dict[str, Any]:
    """lap / step / perf_counter_ns against the floor, for each usable clock."""
    floor_mod = load_floor()
    fl = floor_mod.Floor()
    fl.calibrate()
    m = calls // 4
    calls = 4 * m
    clocks = ["monotonic"] + (["tsc"] if tsc_usable() else [])
    contenders: dict[str, Callable[[], None]] = {"loop": empty4(m), "perf_counter_ns": _pc4(m)}
    keep = []
    for clock in clocks:
        p = gp.Profiler(["a", "b", "c", "d"], clock=clock, capacity=1 << 16)
        q = gp.Profiler(["a", "b", "c", "d"], clock=clock, capacity=1 << 16)
        keep += [p, q]
        floor_fn = fl.mono if clock == "monotonic" else fl.tsc
        contenders[f"floor[{clock}]"] = loop4(floor_fn, m)
        if clock == "tsc":
            contenders["floor[tsc-raw]"] = loop4(fl.tsc_raw, m)
        contenders[f"lap[{clock}]"] = loop4(p.lap, m)
        contenders[f"step[{clock}]"] = step4(q.begin, q.lap, m)
    r = run_rounds(contenders, calls, rounds)
    loop = r["loop"]
    per: dict[str, dict[str, float]] = {}
    for name, v in r.items():
        per[name] = {
            "min_ns": float(v.min()),
            "q25_ns": float(np.quantile(v, 0.25)),
            "median_ns": float(np.median(v)),
            "net_q25_ns": float(np.quantile(v, 0.25) - np.quantile(loop, 0.25)),
        }
    ratios: dict[str, dict[str, float]] = {}
    for clock in clocks:
        fv = r[f"floor[{clock}]"]
        floors = [("floor", fv)]
        if clock == "tsc":
            floors.append(("floor[tsc-raw]", r["floor[tsc-raw]"]))
        for fname, fvv in floors:
            for form in ("lap", "step"):
                v = r[f"{form}[{clock}]"]
                ratios[f"{form}[{clock}] / {fname}"] = {
                    **ratio_stats(v, fvv, n_boot=n_boot),
                    **{
                        "net_" + k: x
                        for k, x in ratio_stats(v, fvv, loop, loop, n_boot=n_boot).items()
                    },
                }
    return {
        "calls_per_run": calls,
        "rounds": rounds,
        "clocks": clocks,
        "floor_clock_source": floor_mod.CLOCK_SOURCE,
        "per_call": per,
        "ratios": ratios,
    }


def bench_probe(calls: int, rounds: int, n_boot: int = 2000) -> dict[str, Any]:
    """The bookkeeping budget: ``_floor_probe.pyx`` variants against the floor and lap."""
    probe = load_probe()
    fl = load_floor().Floor()
    npt = fl.calibrate()
    m = calls // 4
    mono = {
        "lap (gyreprof)": gp.Profiler(["a", "b", "c", "d"]).lap,
        "checks + header": probe.Probe(4).lap_a2,
        "+ bucket": probe.Probe(4).lap_b,
        "+ sum/min/max": probe.Probe(4).lap_c,
        "+ 32-byte ring (lean)": probe.Probe(4).lap,
        "lean, bucket deferred": probe.Probe(4).lap_defer,
        "deferred, no ring": probe.Probe(4).lap_defer_noring,
        "16-byte ring, batch of 64": probe.Probe(4).lap_batch,
    }
    contenders: dict[str, Callable[[], None]] = {
        "loop": empty4(m),
        "floor[monotonic]": loop4(fl.mono, m),
    }
    for k, f in mono.items():
        contenders[f"{k} [monotonic]"] = loop4(f, m)
    clocks = ["monotonic"]
    if tsc_usable():
        clocks.append("tsc")
        contenders["floor[tsc]"] = loop4(fl.tsc, m)
        tsc = {
            "lap (gyreprof)": gp.Profiler(["a", "b", "c", "d"], clock="tsc").lap,
            "checks + header": probe.Probe(4, tsc=True, ns_per_tick=npt).lap_a2,
            "+ 32-byte ring (lean)": probe.Probe(4, tsc=True, ns_per_tick=npt).lap,
            "lean, bucket deferred": probe.Probe(4, tsc=True, ns_per_tick=npt).lap_defer,
            "deferred, no ring": probe.Probe(4, tsc=True, ns_per_tick=npt).lap_defer_noring,
            "16-byte ring, batch of 64": probe.Probe(4, tsc=True, ns_per_tick=npt).lap_batch,
        }
        for k, f in tsc.items():
            contenders[f"{k} [tsc]"] = loop4(f, m)
    r = run_rounds(contenders, 4 * m, rounds)
    out: dict[str, Any] = {}
    for name, v in r.items():
        if name == "loop" or name.startswith("floor"):
            continue
        clock = "tsc" if name.endswith("[tsc]") else "monotonic"
        fv = r[f"floor[{clock}]"]
        out[name] = {
            "q25_ns": float(np.quantile(v, 0.25)),
            "over_floor_ns": float(np.quantile(v, 0.25) - np.quantile(fv, 0.25)),
            **ratio_stats(v, fv, n_boot=n_boot),
        }
    return out


# --------------------------------------------------------------------------- scale


def _cycle(f: Callable[[int], Any], ids: list[int]) -> Callable[[], None]:
    def run() -> None:
        for p in ids:
            f(p)

    return run


def bench_phases(
    calls: int, rounds: int, counts: Sequence[int], n_boot: int = 2000
) -> dict[str, Any]:
    """Cost per lap as the number of phases grows; laps cycle through every phase."""
    fl = load_floor().Floor()
    contenders: dict[str, Callable[[], None]] = {}
    profs = []
    for n in counts:
        p = gp.Profiler([f"p{i}" for i in range(n)], capacity=1 << 16)
        profs.append(p)
        contenders[f"P={n}"] = _cycle(p.lap, [i % n for i in range(calls)])
    contenders["floor"] = _cycle(fl.mono, [i % 4 for i in range(calls)])
    ids0 = [0] * calls

    def loop() -> None:
        for _ in ids0:
            pass

    contenders["loop"] = loop
    r = run_rounds(contenders, calls, rounds)
    base, loop_t = r[f"P={counts[0]}"], r["loop"]
    ql = np.quantile(loop_t, 0.25)
    out = {}
    for n in counts:
        v = r[f"P={n}"]
        out[f"P={n}"] = {
            "net_q25_ns": float(np.quantile(v, 0.25) - ql),
            **ratio_stats(v, base, loop_t, loop_t, n_boot=n_boot),
        }
    out["floor"] = {"net_q25_ns": float(np.quantile(r["floor"], 0.25) - ql)}
    return out


def bench_capacity(
    calls: int, rounds: int, exps: Sequence[int], n_boot: int = 2000
) -> dict[str, Any]:
    """Cost per lap as the ring grows, in the steady state (ring written through once)."""
    m = calls // 4
    contenders: dict[str, Callable[[], None]] = {"loop": empty4(m)}
    profs = []
    for e in exps:
        p = gp.Profiler(["a", "b", "c", "d"], capacity=1 << e)
        profs.append(p)
        loop4(p.lap, (1 << e) // 4 + 1)()  # touch every ring page before timing
        contenders[f"2^{e}"] = loop4(p.lap, m)
    r = run_rounds(contenders, 4 * m, rounds)
    base, loop = r[f"2^{exps[0]}"], r["loop"]
    ql = np.quantile(loop, 0.25)
    out = {}
    for e in exps:
        v = r[f"2^{e}"]
        out[f"2^{e}"] = {
            "net_q25_ns": float(np.quantile(v, 0.25) - ql),
            **ratio_stats(v, base, loop, loop, n_boot=n_boot),
        }
    return out


class _Gang:
    """``k`` persistent threads, each with its own per_thread recorder, lapping on cue."""

    def __init__(self, prof: gp.Profiler, k: int, m: int, entry: str) -> None:
        self.k, self.m = k, m
        self.go = threading.Barrier(k + 1)
        self.done = threading.Barrier(k + 1)
        self.cpu = [0] * k
        self.stop = False
        self.threads = [
            threading.Thread(target=self._work, args=(prof, i, entry), daemon=True)
            for i in range(k)
        ]
        for t in self.threads:
            t.start()

    def _work(self, prof: gp.Profiler, i: int, entry: str) -> None:
        lap = prof.recorder.lap if entry == "recorder.lap" else prof.lap
        body = loop4(lap, self.m)
        tt = time.thread_time_ns
        while True:
            self.go.wait()
            if self.stop:
                return
            t0 = tt()
            body()
            self.cpu[i] = tt() - t0
            self.done.wait()

    def run(self) -> tuple[float, float]:
        """(wall ns per lap over all threads, mean thread CPU ns per lap)."""
        t0 = time.perf_counter_ns()
        self.go.wait()
        self.done.wait()
        wall = time.perf_counter_ns() - t0
        laps = 4 * self.m
        return wall / (self.k * laps), sum(self.cpu) / (self.k * laps)

    def close(self) -> None:
        self.stop = True
        self.go.wait()
        for t in self.threads:
            t.join()


def bench_threads(calls: int, rounds: int, k: int = 16, n_boot: int = 2000) -> dict[str, Any]:
    """Per-lap cost with ``k`` per_thread threads writing at full rate vs one thread.

    Under the GIL the threads take turns, so the wall time per lap over all threads is
    the cost a lap has when ``k`` recorders share the caches; the thread CPU time per
    lap leaves out time spent waiting for the GIL.
    """
    m = max(1, calls // 4)
    gangs: dict[str, _Gang] = {}
    for entry in ("recorder.lap", "prof.lap"):
        for n in (1, k):
            prof = gp.Profiler(["a", "b", "c", "d"], per_thread=True, capacity=1 << 12)
            gangs[f"{entry} x{n}"] = _Gang(prof, n, m, entry)
    wall: dict[str, list[float]] = {g: [] for g in gangs}
    cpu: dict[str, list[float]] = {g: [] for g in gangs}
    rng = np.random.default_rng(2)
    names = list(gangs)
    gc.collect()
    gc.disable()
    try:
        for name in names:
            gangs[name].run()
        for _ in range(rounds):
            for i in rng.permutation(len(names)):
                w, c = gangs[names[i]].run()
                wall[names[i]].append(w)
                cpu[names[i]].append(c)
    finally:
        gc.enable()
        for g in gangs.values():
            g.close()
    out: dict[str, Any] = {"threads": k}
    for entry in ("recorder.lap", "prof.lap"):
        w1, wk = np.asarray(wall[f"{entry} x1"]), np.asarray(wall[f"{entry} x{k}"])
        c1, ck = np.asarray(cpu[f"{entry} x1"]), np.asarray(cpu[f"{entry} x{k}"])
        out[entry] = {
            "wall_ns_1": float(np.quantile(w1, 0.25)),
            f"wall_ns_{k}": float(np.quantile(wk, 0.25)),
            "wall_ratio": ratio_stats(wk, w1, n_boot=n_boot),
            "cpu_ns_1": float(np.quantile(c1, 0.25)),
            f"cpu_ns_{k}": float(np.quantile(ck, 0.25)),
            "cpu_ratio": ratio_stats(ck, c1, n_boot=n_boot),
        }
    return out


# --------------------------------------------------------------------------- report


def _ci(d: dict[str, float], prefix: str = "") -> str:
    return (
        f"{d[prefix + 'ratio']:.3f}x [{d[prefix + 'ci_lo']:.3f}, {d[prefix + 'ci_hi']:.3f}]"
        f" (min {d[prefix + 'min_ratio']:.3f}x, paired {d[prefix + 'paired_median']:.3f}x)"
    )


def report(res: dict[str, Any]) -> str:
    lines = []
    f = res["floor"]
    lines.append(
        f"### lap vs floor ({f['rounds']} rounds x {f['calls_per_run']} calls; "
        f"floor clock: {f['floor_clock_source']})\n"
    )
    lines.append(
        "| form | min ns/call | q25 ns/call | median ns/call | net q25 (loop subtracted) |"
    )
    lines.append("|---|---|---|---|---|")
    for name, v in f["per_call"].items():
        lines.append(
            f"| {name} | {v['min_ns']:.1f} | {v['q25_ns']:.1f} | {v['median_ns']:.1f} | "
            f"{'' if name == 'loop' else format(v['net_q25_ns'], '.1f')} |"
        )
    lines.append("")
    lines.append(
        "| ratio | as called: q25 ratio [95% CI] (min/min, paired median) | net of the empty loop | target |"
    )
    lines.append("|---|---|---|---|")
    for name, v in f["ratios"].items():
        lines.append(f"| {name} | {_ci(v)} | {_ci(v, 'net_')} | <= 1.10x |")
    if "tsc" not in f["clocks"]:
        lines.append("\n(TSC skipped: not invariant here.)")
    if "probe" in res:
        lines.append("\n### bookkeeping budget (benchmarks/_floor_probe.pyx; ratio to the floor)\n")
        lines.append("| variant | q25 ns/call | over the floor, ns | ratio [95% CI] |")
        lines.append("|---|---|---|---|")
        for name, v in res["probe"].items():
            lines.append(f"| {name} | {v['q25_ns']:.1f} | {v['over_floor_ns']:+.1f} | {_ci(v)} |")
    if "phases" in res:
        lines.append("\n### scale: phases (laps cycle through all phases; ratio to the first)\n")
        lines.append("| phases | net ns/lap (q25) | ratio [95% CI] |")
        lines.append("|---|---|---|")
        for name, v in res["phases"].items():
            if name == "floor":
                continue
            lines.append(f"| {name} | {v['net_q25_ns']:.1f} | {_ci(v)} |")
        lines.append(f"| floor (4 ids) | {res['phases']['floor']['net_q25_ns']:.1f} | |")
    if "capacity" in res:
        lines.append("\n### scale: ring capacity (steady state; ratio to the first)\n")
        lines.append("| capacity | net ns/lap (q25) | ratio [95% CI] |")
        lines.append("|---|---|---|")
        for name, v in res["capacity"].items():
            lines.append(f"| {name} | {v['net_q25_ns']:.1f} | {_ci(v)} |")
    if "threads" in res:
        t = res["threads"]
        k = t["threads"]
        lines.append(f"\n### scale: {k} per_thread threads vs 1 (q25 ns per lap, loop included)\n")
        lines.append(
            f"| entry | wall 1 | wall {k} | wall ratio [95% CI] | cpu 1 | cpu {k} | cpu ratio [95% CI] |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for entry in ("recorder.lap", "prof.lap"):
            v = t[entry]
            lines.append(
                f"| {entry} | {v['wall_ns_1']:.1f} | {v[f'wall_ns_{k}']:.1f} | {_ci(v['wall_ratio'])} "
                f"| {v['cpu_ns_1']:.1f} | {v[f'cpu_ns_{k}']:.1f} | {_ci(v['cpu_ratio'])} |"
            )
    return "\n".join(lines)


def run_all(
    quick: bool, scale: bool = True, tiny: bool = False, probe: bool = False
) -> dict[str, Any]:
    """All measurements; ``tiny`` is the pytest smoke size (a few seconds)."""
    nb = 300 if tiny else 2000
    if tiny:
        calls, rounds = 4_000, 5
    elif quick:
        calls, rounds = 8_000, 61
    else:
        calls, rounds = 8_000, 1001
    res: dict[str, Any] = {"floor": bench_lap_vs_floor(calls, rounds, nb)}
    if probe:
        res["probe"] = bench_probe(calls, rounds, nb)
    if scale:
        phases = [1, 4, 16, 64, 255] if not tiny else [1, 255]
        exps = [10, 16, 24] if not (quick or tiny) else ([10, 14] if tiny else [10, 16, 20])
        if not (quick or tiny):
            exps = [10, 12, 16, 20, 22, 24]
        res["phases"] = bench_phases(calls, rounds, phases, nb)
        res["capacity"] = bench_capacity(calls, rounds, exps, nb)
        res["threads"] = bench_threads(calls, max(3, rounds // 3), 16, nb)
    return res


def test_floor_sanity() -> None:
    """Quick mode under pytest: the floor builds, reads the right clock, ratios are sane."""
    fl = load_floor().Floor()
    a = time.monotonic_ns()
    fl.mono(0)
    b = time.monotonic_ns()
    assert a <= fl.value <= b  # the floor reads CLOCK_MONOTONIC (time.monotonic_ns on Linux)
    if tsc_usable():
        fl.calibrate(0.005)
        a = time.monotonic_ns()
        fl.tsc(0)
        b = time.monotonic_ns()
        assert a - 100_000 <= fl.value <= b + 100_000  # TSC converted to ns, near monotonic
    res = run_all(quick=True, tiny=True)
    for v in res["floor"]["ratios"].values():
        assert np.isfinite(v["ratio"]) and v["ratio"] > 0.5, v
    for v in res["phases"].values():
        assert v["net_q25_ns"] > 0
    for entry in ("recorder.lap", "prof.lap"):
        assert np.isfinite(res["threads"][entry]["wall_ratio"]["ratio"])
    assert "lap[monotonic] / floor" in report(res)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=textwrap.dedent(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--no-scale", action="store_true", help="only lap vs floor")
    ap.add_argument(
        "--probe", action="store_true", help="also time the bookkeeping-budget probe variants"
    )
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers as JSON")
    a = ap.parse_args(argv)
    t0 = time.time()
    res = run_all(a.quick, scale=not a.no_scale, probe=a.probe)
    res["meta"] = {
        "python": sys.version.split()[0],
        "gyreprof": gp.__file__,
        "loadavg_end": os.getloadavg(),
        "seconds": round(time.time() - t0, 1),
    }
    print(report(res))
    print(f"\n(load average at end {res['meta']['loadavg_end']}, {res['meta']['seconds']} s)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
