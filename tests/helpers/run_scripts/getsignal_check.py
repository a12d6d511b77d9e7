"""What ``signal.getsignal`` shows under ``gyreprof run``: ``getsignal_check.py own``
installs a SIGTERM handler of its own before stepping; ``getsignal_check.py default``
installs one only when SIG_DFL is in place (as some launchers and servers do), after
stepping, then restores what it replaced. Prints what it saw, then SIGTERMs itself."""

import os
import signal
import sys
import time

import gymnasium as gym

seen = []


def mine(signum, frame):
    print("MY HANDLER RAN", flush=True)
    sys.exit(7)


if sys.argv[1] == "own":
    signal.signal(signal.SIGTERM, mine)
env = gym.make("CartPole-v1")
env.reset(seed=0)
for _ in range(300):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
print(
    "SEEN", signal.getsignal(signal.SIGTERM) is (mine if sys.argv[1] == "own" else signal.SIG_DFL)
)
if sys.argv[1] == "default":
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        old = signal.signal(signal.SIGTERM, mine)
        print("OLD WAS DEFAULT", old is signal.SIG_DFL)
        print("NOW MINE", signal.getsignal(signal.SIGTERM) is mine)
        print("RESTORED FROM", signal.signal(signal.SIGTERM, old) is mine)
        print("DEFAULT AGAIN", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    print("SIGINT", signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
print("NOT ENDED", flush=True)
