"""Registers the Ray job patch (``gyreprof.integrations.ray.job``) when ``ray`` is imported.

Kept apart from that module so that the bootstrap's registration imports no Ray: the
package ``gyreprof.integrations.ray`` imports ``ray`` itself, and loads only in a process
that imported ``ray`` already.
"""

from __future__ import annotations

from types import ModuleType

from gyreprof.integrations._instrument import when_imported


def _install(ray: ModuleType) -> None:
    from gyreprof.integrations.ray import job

    job.install(ray)


def register() -> None:
    when_imported("ray", _install)
