"""Helpers the tests share, in one package (tests/ is on sys.path through conftest, so
they import as ``helpers.<module>``):

- procs/, live_procs/: helper processes the doctor, watchdog, selfcheck and live tests start;
- sweep_samplers/: real samplers for the sweep tests, named to the sweep's subprocesses
  as ``helpers.sweep_samplers.<module>:<factory>`` (run with tests/ as cwd or on
  PYTHONPATH);
- run_scripts/: training scripts for ``gyreprof run`` and runhelp.py, the tests' runner;
- workers_parallel.py: the gymnasium vector-env process trees of the parallelism tests;
- reference.py: the pure-Python reference twins of the compiled core.
"""
