"""Print the comparison tables (gyreprof vs the scripts' own clocks) from a results folder.

python validation/compare.py [OUT]      # default /tmp/gyreprof-validation
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gyreprof-validation")


def load(stem: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    j, o = OUT / f"{stem}.json", OUT / f"{stem}.out"
    if not j.exists() or not o.exists():
        return None
    ind = [line for line in o.read_text().splitlines() if line.startswith("INDEPENDENT ")]
    if not ind:
        return None
    return json.loads(j.read_text()), json.loads(ind[-1].split(" ", 1)[1])


def ph(d: dict[str, Any], side: str, name: str) -> dict[str, Any]:
    return d[side]["phases"][name]  # type: ignore[no-any-return]


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def sb3() -> None:
    print("## 1. SB3 PPO CartPole, 4 envs, 20480 steps\n")
    print(
        "| run | wait ratio gp / own | env_step gp / steps taken | collect steps/s gp / own"
        " | SB3 fps (incl. train) | trainer steps, shares sum | verdict |"
    )
    print("|---|---|---|---|---|---|---|")
    for vec in ("dummy", "subproc"):
        for mode in ("plain", "sleep"):
            got = load(f"sb3_{vec}_{mode}")
            if got is None:
                continue
            d, i = got
            wait = ph(d, "trainer", "wait")
            comp = ph(d, "trainer", "compute")
            env = ph(d, "sampler", "env_step")["count"]
            gp_rate = env / (wait["sum_ns"] / 1e9)
            v = d["verdict"]
            print(
                f"| {vec} {mode} | {pct(d['wait']['ratio'])} / {pct(i['wait_ratio'])}"
                f" | {env} / {i['num_timesteps']}"
                f" | {gp_rate:.0f} / {i['collect_steps_per_s']:.0f}"
                f" | {i['sb3_fps_last']:.0f}"
                f" | {d['trainer']['steps']}, {pct(wait['share'] + comp['share'])}"
                f" | {v['bound']}-bound ({v.get('loop')}) |"
            )
    print()


def torchrl() -> None:
    print("## 2. TorchRL Collector on GymEnv CartPole, 5000 frames, 200 per batch\n")
    print(
        "| body | wait s gp / own | body s gp / own | wait ratio gp / own | env_step gp / frames | verdict |"
    )
    print("|---|---|---|---|---|---|")
    for tag in ("sleepms0", "sleepms20", "sleepfactor3"):
        got = load(f"torchrl_{tag}")
        if got is None:
            continue
        d, i = got
        w, c = ph(d, "trainer", "wait"), ph(d, "trainer", "compute")
        v = d["verdict"]
        print(
            f"| {tag} | {w['sum_ns'] / 1e9:.3f} / {i['wait_s']:.3f}"
            f" | {c['sum_ns'] / 1e9:.3f} / {i['body_s']:.3f}"
            f" | {pct(d['wait']['ratio'])} / {pct(i['wait_ratio'])}"
            f" | {ph(d, 'sampler', 'env_step')['count']} / {i['frames']}"
            f" | {v['bound']}-bound ({v.get('loop')}) |"
        )
    print()


def gym() -> None:
    print("## 3. gymnasium vector envs, 5000 vector steps x 4 envs, CleanRL-style loop\n")
    print(
        "| vec | envs.step calls own | step_async / step_wait count gp | mean per envs.step own"
        " | gp: step_async+step_wait mean, or env_step time per vector step | env_step gp"
        " / workers' own count | env_reset gp | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for vec in ("async", "sync"):
        got = load(f"gym_{vec}")
        if got is None:
            continue
        d, i = got
        sa, sw = ph(d, "sampler", "step_async"), ph(d, "sampler", "step_wait")
        env, rst = ph(d, "sampler", "env_step"), ph(d, "sampler", "env_reset")
        n = i["envs_step_calls"]
        if sa["count"]:
            gp_mean = (sa["sum_ns"] + sw["sum_ns"]) / n / 1e3
        else:
            gp_mean = (env["sum_ns"] + rst["sum_ns"]) / n / 1e3
        print(
            f"| {vec} | {n} | {sa['count']} / {sw['count']} | {i['envs_step_mean_us']:.0f} us"
            f" | {gp_mean:.0f} us | {env['count']} / {i['worker_env_steps_sum']}"
            f" (steps x envs = {i['expected_env_steps']}) | {rst['count']}"
            f" | {d['verdict']['bound']} |"
        )
    print()


def doctor() -> None:
    print("## 4. gyreprof doctor PID (no --log)\n")
    print("| target | state | exit | progress_source | evidence (first line) |")
    print("|---|---|---|---|---|")
    for name in ("sb3_file", "sb3_null", "spin_null"):
        p = OUT / f"doctor_{name}.json"
        if not p.exists():
            continue
        d = json.loads(p.read_text())
        ev = d["evidence"] if isinstance(d["evidence"], list) else [d["evidence"]]
        busy = [e for e in ev if "no progress signal" in e]
        print(
            f"| {name} | {d['state']} | {d['exit_code']} | {d.get('progress_source')}"
            f" | {(busy or ev)[0][:140]} |"
        )
    print()


def overhead() -> None:
    p = OUT / "overhead.tsv"
    if not p.exists():
        return
    rows = [line.split("\t") for line in p.read_text().splitlines() if line]
    print("## 5. Overhead: SB3 DummyVecEnv script, 3x bare vs 3x gyreprof run, interleaved\n")
    print("| | bare (3 runs) | gyreprof run (3 runs) | ratio of medians |")
    print("|---|---|---|---|")
    for k, idx in (("wall s", 2), ("CPU s (tree)", 3)):
        b = [float(r[idx]) for r in rows if r[0] == "bare"]
        g = [float(r[idx]) for r in rows if r[0] == "run"]
        if b and g:
            print(
                f"| {k} | {', '.join(f'{x:.2f}' for x in b)} | {', '.join(f'{x:.2f}' for x in g)}"
                f" | {statistics.median(g) / statistics.median(b):.3f} |"
            )
    loads = [float(r[4]) for r in rows]
    print(f"\n1-min load average at each start: {', '.join(f'{x:.1f}' for x in loads)} (2 cores)\n")


if __name__ == "__main__":
    sb3()
    torchrl()
    gym()
    doctor()
    overhead()
