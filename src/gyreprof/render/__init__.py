"""Renderers: every result type written as text, Markdown, CSV, JSON and metrics.

The result classes (``Summary``, ``PhaseStats``, ``Window``, ``WaitReport``,
``Verdict``, ``RunReport``, ``SweepResult``) keep only data and the values derived
from it; what a reader sees is written here, one module per format:

- :mod:`gyreprof.render.text`: what ``print(result)`` shows;
- :mod:`gyreprof.render.markdown`: ``to_markdown()``;
- :mod:`gyreprof.render.csv`: ``to_csv()``;
- :mod:`gyreprof.render.json`: ``to_json(path=None, *, indent=None)``, strict JSON
  written atomically (the record itself comes from :mod:`gyreprof.model._serial`);
- :mod:`gyreprof.render.metrics`: flat ``{name: number}`` dicts for loggers;
- :mod:`gyreprof.render.sweep`: a sweep result's text, CSV and plot.

The HTML report (:mod:`gyreprof.export.html`) takes its words from the same place.
The wording of notes and caveats lives in :mod:`gyreprof._support.notes`, numbers are
formatted by :mod:`gyreprof._support.format`. A renderer knows the result types by their
fields only (it imports none of them), so any layer may use it.
"""

from __future__ import annotations
