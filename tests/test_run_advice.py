"""Advice a launcher user can follow (``gyreprof run``): its options, the words for a
crash or a stop, the hand-marking hint followed literally, a ``--save`` folder's
command line and exit code.

Real runs under ``gyreprof run`` (subprocesses); the wording per place
(code / run / report) is checked in-process on crafted profiles.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gymnasium")

import gyreprof as gp  # noqa: E402
from gyreprof._support.advice import advice_for  # noqa: E402
from gyreprof._support.format import fmt_pct  # noqa: E402
from gyreprof.analysis.run import HAND_MARKING  # noqa: E402
from gyreprof.analysis.verdict import diagnose  # noqa: E402

from helpers.run_scripts.runhelp import (  # noqa: E402
    check_format,
    gyreprof_popen,
    gyreprof_run,
    printed,
    script,
    sigterm_when_ready,
)

MS = 1_000_000
US = 1_000


def _write(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _gyreprof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyreprof", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


# ------------------------------------------------------------ the hand-marking hint


def _printed_hint(stderr: str) -> list[str]:
    """The hint's code lines as the report printed them (after "Mark the phases by hand")."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if "Mark the phases by hand" in line)
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        out.append(line.strip())
    return out


def test_the_hand_marking_hint_followed_literally_gives_a_wait_ratio_and_a_verdict(
    tmp_path: Path,
) -> None:
    # 1. a script nothing recognises: the report prints the hint
    plain = _write(tmp_path, "plain.py", "print('no loop here')\n")
    proc, _ = gyreprof_run(tmp_path, plain)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hint = _printed_hint(proc.stderr)
    assert hint == list(HAND_MARKING)
    # 2. the hint, pasted as printed: the set-up lines at the top, the loop lines in the loop
    setup = [h for h in hint if not h.startswith(("with ", "#"))]
    loop = [h for h in hint if h.startswith("with ")]
    assert setup and len(loop) == 2
    body = "\n".join(
        [
            "import time",
            *setup,
            "def _batches():",
            "    while True:",
            "        time.sleep(0.003)  # a slow supply: the trainer waits",
            "        yield 1",
            "batches = _batches()",
            "def update(batch):",
            "    time.sleep(0.001)",
            "for _ in range(150):",
            *("    " + line for line in loop),
            "",
        ]
    )
    marked = _write(tmp_path, "marked.py", body)
    save = tmp_path / "saved"
    proc, data = gyreprof_run(tmp_path, marked, options=("--save", str(save)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert "nothing recognised" not in proc.stderr
    assert "trainer (marked by hand: your Profiler(['wait', 'compute']) in main" in proc.stderr
    assert data["trainer"]["phases"]["wait"]["count"] == 150
    # the waits hold the 3 ms sleeps, the updates the 1 ms ones: wide bounds, a loaded host
    assert 0.3 < data["wait"]["ratio"] < 0.97
    assert data["verdict"]["bound"] in ("sampler", "balanced", "trainer")
    assert data["verdict"]["wait_ratio"] == pytest.approx(data["wait"]["ratio"])
    # 3. the file the hint autosaves: gyreprof report gives the wait ratio and the verdict
    rep = _gyreprof("report", "trainer.snap", "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    out = json.loads(rep.stdout)
    assert out["wait"]["ratio"] == pytest.approx(data["wait"]["ratio"], abs=0.02)
    assert out["verdict"]["bound"] in ("sampler", "balanced", "trainer")
    # its advice names this command's options, not the API's
    text = _gyreprof("report", "trainer.snap", cwd=tmp_path).stdout
    assert "--loop sync" in text and "pass loop='sync'" not in text
    # 4. the --save folder reads back with the user's trainer, the command and its exit code
    again = _gyreprof("report", str(save), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"gyreprof run: {marked} (exit code 0)" in again.stdout
    # the answer line gives the wait ratio (the run's own figure), the tables follow
    ratio = f"the trainer waits {fmt_pct(data['wait']['ratio'])} of its time"
    assert "marked by hand" in again.stdout and ratio in again.stdout.splitlines()[2]
    back = json.loads(_gyreprof("report", str(save), "--json", cwd=tmp_path).stdout)
    assert back["exit_code"] == 0
    assert back["wait"]["ratio"] == pytest.approx(data["wait"]["ratio"])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_trainer_marked_by_hand_in_a_worker_process_joins_the_report(
    tmp_path: Path, method: str
) -> None:
    body = f"""
        import multiprocessing as mp
        import time

        def train():
            import gyreprof as gp

            tp = gp.Profiler(["wait", "compute"])
            for _ in range(50):
                with tp.phase("wait"):
                    time.sleep(0.002)
                with tp.phase("compute"):
                    time.sleep(0.001)

        if __name__ == "__main__":
            p = mp.get_context({method!r}).Process(target=train)
            p.start()
            p.join()
            print("CHILD", p.pid, flush=True)
    """
    proc, data = gyreprof_run(tmp_path, _write(tmp_path, "worker.py", body))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    child = printed(proc.stdout, "CHILD")
    assert data["trainer"]["phases"]["wait"]["count"] == 50
    assert data["wait"] is not None and data["verdict"]["wait_ratio"] is not None
    assert child in [p["pid"] for p in data["processes"] if p["contributed"]]


def test_a_users_other_profilers_show_as_tables_of_their_own(tmp_path: Path) -> None:
    body = """
        import gymnasium as gym
        import gyreprof as gp

        prof = gp.Profiler(["obs", "act"], label="my-loop")
        unused = gp.Profiler(["never"])
        env = gym.make("CartPole-v1")
        env.reset(seed=0)
        for _ in range(300):
            with prof.phase("act"):
                a = env.action_space.sample()
            with prof.phase("obs"):
                _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                env.reset()
    """
    proc, data = gyreprof_run(tmp_path, _write(tmp_path, "own.py", body))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    check_format(data)
    assert "your profiler my-loop in main" in proc.stderr
    assert "never" not in proc.stderr  # a profiler that recorded nothing is left out
    assert data["sampler"]["phases"]["env_step"]["count"] == 300  # the launcher's own, too


# ------------------------------------------------------------ crashes and stops


def _no_hint(stderr: str) -> None:
    assert "Mark the phases by hand" not in stderr
    assert 'with tp.phase("wait")' not in stderr


def test_an_exit_code_before_any_step_gets_failure_words(tmp_path: Path) -> None:
    body = """
        import gymnasium as gym

        env = gym.make("CartPole-v1")
        raise SystemExit(3)
    """
    proc, data = gyreprof_run(tmp_path, _write(tmp_path, "exit3.py", body))
    assert proc.returncode == 3
    assert data is not None
    _no_hint(proc.stderr)
    first = data["notes"][0]
    assert first.startswith("nothing recorded: the command failed (exit code 3) before any step")
    assert first in proc.stderr
    assert "start-up trail" in first  # it points at the trail's lines


def test_a_fatal_signal_before_any_step_gets_crash_words(tmp_path: Path) -> None:
    body = """
        import os, signal
        import gymnasium as gym

        env = gym.make("CartPole-v1")
        os.kill(os.getpid(), signal.SIGSEGV)
    """
    proc, data = gyreprof_run(tmp_path, _write(tmp_path, "segv.py", body))
    assert proc.returncode == 128 + signal.SIGSEGV
    assert data is not None
    _no_hint(proc.stderr)
    assert data["notes"][0].startswith(
        "nothing recorded: the command crashed (SIGSEGV, exit code 139)"
    )
    assert any("killed by SIGSEGV" in n and "its stacks" in n for n in data["notes"])


def test_a_command_stopped_before_its_loop_gets_stop_words(tmp_path: Path) -> None:
    body = """
        import time

        print("READY", flush=True)
        time.sleep(120)  # stopped by the test's SIGTERM
    """
    data = sigterm_when_ready(tmp_path, sys.executable, _write(tmp_path, "hang.py", body))
    first = data["notes"][0]
    assert first.startswith("nothing recorded: the command was stopped by SIGTERM")
    assert "interrupted or timed out" in first
    assert not any("Mark the phases by hand" in n for n in data["notes"])


def test_a_command_that_exits_on_the_signal_passed_to_it_is_called_interrupted(
    tmp_path: Path,
) -> None:
    body = """
        import signal, sys, time

        signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
        print("READY", flush=True)
        time.sleep(120)  # ended by its handler of the test's SIGTERM
    """
    proc, out = gyreprof_popen(tmp_path, sys.executable, _write(tmp_path, "quits.py", body))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    data = json.loads(out.read_text())
    first = data["notes"][0]
    assert first.startswith(
        "nothing recorded: the command was interrupted (gyreprof run received SIGTERM) and "
        "exited with code 1"
    )
    _no_hint(err)


def test_a_failure_after_recording_says_what_the_numbers_cover(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, script("crash.py"), "300", "exit3")
    assert proc.returncode == 3
    assert data is not None
    assert data["sampler"]["phases"]["env_step"]["count"] == 300
    assert any("exited with code 3: the numbers cover" in n for n in data["notes"])


def test_a_run_to_completion_with_nothing_recognised_keeps_the_hint(tmp_path: Path) -> None:
    proc, data = gyreprof_run(tmp_path, sys.executable, "-c", "print('plain')")
    assert proc.returncode == 0
    assert "Mark the phases by hand" in proc.stderr


# ------------------------------------------------------------ the warm-up options


def _warmup(data: dict[str, Any], side: str) -> dict[str, Any]:
    out: dict[str, Any] = data[side]["warmup"]
    return out


def test_warmup_s_excludes_the_first_seconds_of_the_sampler(tmp_path: Path) -> None:
    loop = script("gym_loop.py")
    proc, plain = gyreprof_run(tmp_path, loop, "20000")
    assert proc.returncode == 0 and plain is not None
    assert _warmup(plain, "sampler")["rule"] == "none"
    assert "rerun with gyreprof run --warmup-s S" in proc.stderr  # the advice names the option
    proc, warm = gyreprof_run(tmp_path, loop, "20000", options=("--warmup-s", "0.05"))
    assert proc.returncode == 0 and warm is not None
    w = _warmup(warm, "sampler")
    assert w["rule"] == "first 0.05 s" and w["done"]
    steady = warm["sampler"]["phases"]["env_step"]["count"]
    assert 0 < steady < 20000  # the steps of the first 0.05 s are reported apart
    assert "warm-up: first 0.05 s excluded" in proc.stderr


def test_warmup_steps_leaves_the_sampler_alone_and_says_so(tmp_path: Path) -> None:
    proc, data = gyreprof_run(
        tmp_path, script("gym_loop.py"), "500", options=("--warmup-steps", "3")
    )
    assert proc.returncode == 0 and data is not None
    # the sampler marks no steps: a warm-up in steps would never end there
    assert _warmup(data, "sampler")["rule"] == "none"
    assert data["sampler"]["phases"]["env_step"]["count"] == 500
    assert any("--warmup-steps 3 excluded the trainer's first 3 steps" in n for n in data["notes"])


@pytest.mark.slow
def test_warmup_steps_excludes_the_trainers_first_steps(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    # 4 envs x 64 steps per rollout, 1024 steps: 4 collect-and-update steps
    command = (script("sb3_ppo.py"), "dummy", "env", "1024", "0", "64")
    proc, data = gyreprof_run(tmp_path, *command, options=("--warmup-steps", "2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    w = _warmup(data, "trainer")
    assert w["rule"] == "first 2 steps" and w["steps"] == 2 and w["done"]
    assert data["trainer"]["phases"]["wait"]["count"] == 2
    assert "warm-up: first 2 steps excluded" in proc.stderr


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("--warmup-steps", "-1"), "argument --warmup-steps: give a whole number"),
        (("--warmup-steps", "1.5"), "argument --warmup-steps: give a whole number"),
        (("--warmup-steps", "x"), "argument --warmup-steps: give a whole number"),
        (("--warmup-s", "nan"), "argument --warmup-s: give a number of seconds"),
        (("--warmup-s", "inf"), "argument --warmup-s: give a number of seconds"),
        (("--warmup-s", "-0.5"), "argument --warmup-s: give a number of seconds"),
        (("--warmup-s", "1", "--warmup-steps", "2"), "not allowed with argument"),
        (("--loop", "pipelined"), "argument --loop: invalid choice"),
    ],
)
def test_bad_option_values_are_refused_before_anything_runs(
    tmp_path: Path, options: tuple[str, ...], words: str
) -> None:
    marker = tmp_path / "ran"
    proc, data = gyreprof_run(
        tmp_path, sys.executable, "-c", f"open({str(marker)!r}, 'w').close()", options=options
    )
    assert proc.returncode == 2
    assert words in proc.stderr
    assert not marker.exists() and data is None


def test_loop_declares_the_shape_of_a_hand_marked_trainer(tmp_path: Path) -> None:
    body = "\n".join(
        [
            "import time",
            *[h for h in HAND_MARKING if not h.startswith(("with ", "#"))],
            "batches = iter(range(10**6))",
            "def update(batch):",
            "    time.sleep(0.0005)",
            "for _ in range(100):",
            *("    " + h for h in HAND_MARKING if h.startswith("with ")),
            "",
        ]
    )
    marked = _write(tmp_path, "sync.py", body)
    proc, data = gyreprof_run(tmp_path, marked, options=("--loop", "sync"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data is not None
    assert data["verdict"]["loop"] == "sync" and data["verdict"]["loop_source"] == "declared"


# ------------------------------------------------------------ the words per place

#: API forms a launcher user cannot type anywhere
API_ONLY = (
    "gp.sweep(",
    "gp.check_parallelism(",
    "diagnose(",
    "pass loop=",
    "pass it as sampler=",
    "(prof.phase('fwd'), ...)",
    "pass Profiler(warmup_steps=...) or warmup_s=...",
)


def _lines(v: Any) -> list[str]:
    return [*v.advice, *v.unknowns, *v.caveats]


def _sampler(phases: dict[str, int], steps: int = 200, gap_s: float = 0.0) -> gp.Profiler:
    sp = gp.Profiler(list(phases))
    for _ in range(steps):
        sp.begin()
        for name, d in phases.items():
            sp.record(name, d)
        if gap_s:
            time.sleep(gap_s)  # untimed wall time between the recorded phases
    sp.end()
    return sp


def _trainer(wait_ns: int, compute_ns: int, steps: int = 200) -> gp.Profiler:
    tp = gp.Profiler(["wait", "compute"])
    for _ in range(steps):
        tp.begin()
        tp.record("wait", wait_ns)
        tp.record("compute", compute_ns)
    tp.end()
    return tp


def _cases() -> dict[str, dict[str, Any]]:
    return {
        "env, no trainer": {"sampler": _sampler({"env": MS, "fwd": 10 * US})},
        "fwd, sampler-bound": {
            "sampler": _sampler({"env": 10 * US, "fwd": MS}),
            "trainer": _trainer(MS, MS),
        },
        "untimed": {"sampler": _sampler({"env": US}, steps=30, gap_s=0.002)},
        "no sampler": {"trainer": _trainer(3 * MS, MS)},
    }


def test_launcher_advice_names_launcher_options_and_commands() -> None:
    cases = _cases()
    with advice_for("run"):
        verdicts = {name: diagnose(**kw) for name, kw in cases.items()}
    for name, v in verdicts.items():
        for line in _lines(v):
            for api in API_ONLY:
                assert api not in line, (name, line)
    text = {name: "\n".join(_lines(v)) for name, v in verdicts.items()}
    assert "gyreprof check PID --expect env_worker=N" in text["env, no trainer"]
    assert "rerun with gyreprof run --warmup-" in text["env, no trainer"]
    assert "gp.Profiler(['wait', 'compute'])" in text["env, no trainer"]
    assert (
        "gyreprof sweep yourpkg.rollout:make_sampler --param batch_size"
        in text["fwd, sampler-bound"]
    )
    assert "gyreprof run --loop sync" in text["fwd, sampler-bound"]
    assert "prof = gp.Profiler(['fwd', 'buffer'])" in text["untimed"]
    assert "gyreprof report sampler.snap trainer.snap" in text["no sampler"]


def test_report_advice_names_the_report_commands_options() -> None:
    cases = _cases()
    with advice_for("report"):
        v = diagnose(**cases["no sampler"])
        w = diagnose(**cases["fwd, sampler-bound"])
    assert any("give gyreprof report --loop sync" in u for u in v.unknowns)
    assert any("gyreprof report sampler.snap trainer.snap" in u for u in v.unknowns)
    assert any("gyreprof sweep" in a for a in w.advice)


def test_code_advice_keeps_the_api() -> None:
    cases = _cases()
    v = diagnose(**cases["fwd, sampler-bound"])
    assert any("gp.sweep(make_sampler, 'batch_size'" in a for a in v.advice)
    assert any("pass loop='sync'" in u for u in v.unknowns)
    u = diagnose(**cases["env, no trainer"])
    assert any("gp.check_parallelism(pid" in a for a in u.advice)


def test_the_place_belongs_to_the_block_not_the_process() -> None:
    with advice_for("run"):
        pass
    v = diagnose(**_cases()["no sampler"])
    assert any("pass it as sampler=" in u for u in v.unknowns)
    with pytest.raises(ValueError, match="advice is worded for one of"):
        with advice_for("terminal"):
            pass


def test_user_profiler_outside_a_run_saves_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GYREPROF_RUN")}
    code = "import gyreprof as gp\np = gp.Profiler(['a'])\nwith p.phase('a'): pass\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0
    assert list(tmp_path.iterdir()) == []


def test_report_of_a_trainer_still_warming_up_says_why_there_is_no_verdict(
    tmp_path: Path,
) -> None:
    tp = gp.Profiler(["wait", "compute"], warmup_steps=5)  # and no tp.begin(): never ends
    for _ in range(20):
        with tp.phase("wait"):
            pass
        with tp.phase("compute"):
            pass
    (tmp_path / "t.snap").write_bytes(tp.snapshot().to_bytes())
    rep = _gyreprof("report", "t.snap", cwd=tmp_path)
    assert rep.returncode == 0
    assert "no steady samples in them (still in its warm-up, first 5 steps)" in rep.stderr
    assert "mark them with prof.begin(), or use warmup_s=" in rep.stdout
