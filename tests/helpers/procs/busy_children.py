"""Starts a worker process that computes (as a vector-env worker steps) and waits for it
in a pipe read: the parent's own CPU sits idle while its child works. The worker ends
when the parent does."""

from __future__ import annotations

import subprocess
import sys

SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"
worker = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE)
print("ready", flush=True)
worker.stdout.read()  # type: ignore[union-attr]
