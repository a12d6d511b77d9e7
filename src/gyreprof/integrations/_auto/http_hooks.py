"""The HTTP clients ``gyreprof run`` instruments, registered without loading their patches.

Every process of a run bootstraps; few make HTTP requests. The patches
(:mod:`patch_http`, with the request log and its regular expressions) load when one
of these clients is first imported, not at start-up.
"""

from __future__ import annotations

from types import ModuleType

from gyreprof.integrations._auto import hooks

#: module names, each patched by ``patch_http.INSTALLERS[name]`` once imported
CLIENTS: tuple[str, ...] = (
    "httpx",
    "httpx2",
    "openai",
    "requests",
    "urllib.request",
    "http.client",
    "aiohttp",
)


def _installer(name: str) -> hooks.Callback:
    def install(module: ModuleType) -> None:
        from gyreprof.integrations._auto import patch_http

        patch_http.install(name, module)

    return install


def register() -> None:
    """Patch each HTTP client when (if ever) it is imported."""
    for name in CLIENTS:
        hooks.when_imported(name, _installer(name))
