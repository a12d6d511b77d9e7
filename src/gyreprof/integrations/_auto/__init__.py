"""Automatic instrumentation behind ``gyreprof run`` (private).

- ``state``: this process's profilers (one sampler and one trainer Profiler per
  thread, created on first use), the nesting guard, and the save at exit.
- ``hooks``: the post-import hook that patches a library when it is imported,
  and the class patcher (idempotent, subclasses included).
- ``patch_gym`` / ``patch_sb3`` / ``patch_torchrl`` / ``patch_mp``: what is
  patched in each library.
- ``bootstrap``: started by the ``sitecustomize`` that ``gyreprof run`` puts
  first on ``PYTHONPATH`` of every Python process of the run.
- ``records`` / ``collect``: what a process leaves in the run directory and how
  ``gyreprof run`` reads it back into one report.
"""
