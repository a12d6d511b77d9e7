"""Start-up failure: prints a line, then dies on a configuration error (stdout/stderr -> a log)."""

from __future__ import annotations

print("loading config from train.yaml")
config: dict[str, float] = {"batch_size": 64}
raise KeyError("config key 'learning_rate' is missing")
