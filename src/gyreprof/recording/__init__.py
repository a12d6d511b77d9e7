"""Taking measurements: the Profiler, the per-process set of recorders, autosave, the
rings read by live tools and the sources a report reads a run from."""
