"""Why does nothing move? The process doctor, the stall watchdog, the start-up banner,
the dependency check and the sampler self-check.

(Named ``diagnostics`` so that ``gyreprof.diagnose`` stays the bottleneck verdict
function of the public API.)
"""
