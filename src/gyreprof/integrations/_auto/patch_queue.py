"""Blocking waits for data: the training thread's ``wait`` when its data is made elsewhere.

``queue.Queue.get``, ``multiprocessing``'s ``Queue.get`` and ``SimpleQueue.get``,
``concurrent.futures.Future.result`` and ``ray.get`` (when ray is imported)
report each blocking call to the thread's training timeline
(``state.data_wait``, kind ``fed``), but only on a thread whose waits count: one
that trains, or the default trainer (the main thread of the run's main process
while no thread has trained, where the wait's end is the update signal, so a
torch-free ``item = q.get(); work(item)`` gets wait = the get, compute = the
rest). Every other thread (a thread pool's idle workers, a worker process) calls
straight through: one thread-local read, no profilers created. A non-blocking
``get(block=False)`` is not a wait.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import hooks
from gyreprof.integrations._auto import state as st


def _timed(t: st.ThreadState, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    t.in_wait = True  # a get inside this wait (a future's queue) is part of it
    start = t.now()
    try:
        return original(*args, **kwargs)
    finally:
        t.in_wait = False
        st.data_wait(t, start, t.now(), "fed")


def _get(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def get(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        t = st.waiting_thread() if block else None
        if t is None:
            return original(self, block, timeout)
        return _timed(t, original, self, block, timeout)

    return get


def _simple_get(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def get(self: Any) -> Any:
        t = st.waiting_thread()
        if t is None:
            return original(self)
        return _timed(t, original, self)

    return get


def _result(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def result(self: Any, timeout: float | None = None) -> Any:
        t = st.waiting_thread()
        if t is None:
            return original(self, timeout)
        return _timed(t, original, self, timeout)

    return result


def _ray_get(original: Callable[..., Any]) -> Callable[..., Any]:
    def get(*args: Any, **kwargs: Any) -> Any:
        t = st.waiting_thread()
        if t is None:
            return original(*args, **kwargs)
        return _timed(t, original, *args, **kwargs)

    return hooks.mark(get, original)


def _install_queue(module: ModuleType) -> None:
    hooks.patch_methods(module.Queue, ("get",), _get)


def _install_mp_queues(module: ModuleType) -> None:
    hooks.patch_methods(module.Queue, ("get",), _get)
    hooks.patch_methods(module.SimpleQueue, ("get",), _simple_get)


def _install_futures(module: ModuleType) -> None:
    hooks.patch_methods(module.Future, ("result",), _result)


def _install_ray(ray: ModuleType) -> None:
    fn = getattr(ray, "get", None)
    if callable(fn) and not hooks.is_wrapped(fn):
        setattr(ray, "get", _ray_get(fn))  # noqa: B010 - a module attribute


def register() -> None:
    hooks.when_imported("queue", _install_queue)
    hooks.when_imported("multiprocessing.queues", _install_mp_queues)
    hooks.when_imported("concurrent.futures._base", _install_futures)
    hooks.when_imported("ray", _install_ray)
