"""SB3 DQN on CartPole that SIGKILLs itself mid-run: ``signals_sb3_killed.py STEPS``.

After STEPS env steps (learning from step 100, a gradient step every 4) a callback
prints ``KILLING <pid>`` and kills the process with SIGKILL: it saves nothing, so
``gyreprof run`` reads it from its live segments.
"""

import os
import signal
import sys

from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback


class KillAt(BaseCallback):
    def __init__(self, at):
        super().__init__()
        self.at = at

    def _on_step(self):
        if self.num_timesteps >= self.at:
            print("KILLING", os.getpid(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return True


if __name__ == "__main__":
    steps = int(sys.argv[1])
    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=100, train_freq=4, seed=0, device="cpu")
    model.learn(steps * 10, callback=KillAt(steps))
