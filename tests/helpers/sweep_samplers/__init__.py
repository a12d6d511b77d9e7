"""Real samplers for the sweep tests (importable by the sweep's subprocesses by name)."""
