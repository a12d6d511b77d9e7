"""Automatic instrumentation behind ``gyreprof run`` (private).

- ``state``: this process's profilers (one sampler and one trainer Profiler per
  thread, created on first use), the nesting guard, and the save at exit.
- the libraries' instrumentors are ``gyreprof.integrations.libs`` and
  ``gyreprof.integrations.http`` (each with ``instrument()`` / ``uninstrument()``);
  ``workers``: the vector-env workers' roles they install.
- ``bootstrap``: started by the ``sitecustomize`` that ``gyreprof run`` puts
  first on ``PYTHONPATH`` of every Python process of the run.
- ``records`` / ``collect``: what a process leaves in the run directory and how
  ``gyreprof run`` reads it back into one report.
"""
