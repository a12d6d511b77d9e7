"""TorchRL ParallelEnv(2) of CartPole stepped 20 times; then the script checks its own
tree with gp.check_parallelism (as ``gyreprof check`` would) and prints
``OBSERVED <n env_worker>`` and ``FINDINGS <kinds>``. Its env code has no gyreprof."""

import os

from torchrl.envs import GymEnv, ParallelEnv


def make():
    return GymEnv("CartPole-v1")


if __name__ == "__main__":
    env = ParallelEnv(2, make)
    env.reset()
    for _ in range(20):
        env.rand_step()
    import gyreprof as gp

    report = gp.check_parallelism(os.getpid(), expected={"env_worker": 2})
    print("OBSERVED", report.observed.get("env_worker", 0), flush=True)
    print("FINDINGS", ",".join(sorted(f.kind for f in report.details)) or "-", flush=True)
    env.close()
