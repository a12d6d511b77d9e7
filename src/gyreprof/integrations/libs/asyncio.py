"""asyncio's instrumentor (:func:`instrument` / :func:`uninstrument`): the training thread's
wait on rollouts awaited in an event loop, and the groups of requests a coroutine waits
on together (batches).

Patched when ``asyncio`` is first imported, so a process that never imports asyncio
patches nothing.

**The wait.** A training thread that runs ``asyncio.run(...)`` (or
``loop.run_until_complete``) to get its batch waits from its first rollout request to
the moment its code has the batch back (``integrations._auto.loop_wait`` says how the
wait is made). Here:

- the selector's ``select`` of every selector event loop is timed, on a thread whose
  waits count (``state.waiting_thread``: it trains, or it is the default trainer), with
  a timeout that is not zero (a poll while callbacks are ready is no idle time), while
  requests of this thread are in flight (its request log's core in-flight count: kind
  ``own``) or a coroutine of this thread is blocked in ``asyncio.Queue.get`` (kind
  ``fed``): the loop idled, so the thread waited;
- the ends of what the training code awaits are reported: a gather, a wait or a
  ``TaskGroup`` (below), an ``as_completed`` loop's last result, a queue ``get`` that
  blocked; the request log reports each request's end (``rollout_log.Request.finish``).

The naive rule (the loop's idle time alone) leaves out what the loop computes on the
way to the batch: the answers' parsing, the SDK's work, the scoring in the gathered
coroutines. The training code waits for those as well; a request whose answer came
while the thread computed is no wait.
Not covered: event loops that do not use ``selectors`` (uvloop).

**Batches.** ``asyncio.gather`` (2+ awaitables), ``asyncio.wait`` (all completed),
``asyncio.as_completed`` (read to its last) and ``asyncio.TaskGroup`` record a *group*: the calling thread and the interval from
the call to the end of the wait (``rollout_log.add_group``), read back by
``analysis.rollouts`` as the batch of the requests made in it. A group inside
another (a gather in a task of a gather) is not recorded: a context variable, which
the tasks a group creates inherit, says a group is open. Groups are recorded only
once an HTTP client has been patched (its request log is loaded).
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable
from types import GeneratorType, ModuleType
from typing import TYPE_CHECKING, Any

from gyreprof.integrations._auto import loop_wait as lw
from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import Instrumentor, is_wrapped, mark

_RL = "gyreprof.integrations._auto.rollout_log"
_modules = sys.modules
_now = time.monotonic_ns  # the request log's clock
_get_ident = threading.get_ident

if TYPE_CHECKING:
    import contextvars

#: a group (gather, wait, TaskGroup) is open in this context: groups inside it are its own
#: (made by :func:`install`: ``contextvars`` loads with asyncio, not with every process)
_grouping: contextvars.ContextVar[bool]


def _requests_in_flight() -> bool:
    """This thread has HTTP rollout requests in flight (read from its request log)."""
    rl = _modules.get(_RL)
    if rl is None:
        return False
    log = getattr(rl._tls, "log", None)
    return bool(log is not None and log.core_ok and log.spans_core.in_flight > 0)


class Selector:
    """Namespace of the ``select`` wrapper put on each selector event loop's selector."""

    @staticmethod
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def select(timeout: float | None = None) -> Any:
            if timeout is not None and timeout <= 0:
                return original(timeout)
            if getattr(st.tls, "t", None) is None:  # no request made here, nothing waits
                return original(timeout)
            w = st.waiting_thread()
            if w is None:
                return original(timeout)
            if _requests_in_flight():
                kind = "own"
            elif lw.idle.getters > 0:
                kind = "fed"
            else:
                return original(timeout)
            start = w.now()
            # waiting now: the stack sampler counts this thread's samples as the wait's
            # (a wait is reported when it ends; the flag holds no other wait meanwhile)
            w.in_wait = True
            try:
                return original(timeout)
            finally:
                w.in_wait = False
                try:
                    lw.idled(w, start, w.now(), kind)
                except Exception:  # noqa: BLE001, S110 - never into the loop
                    pass

        return mark(select, original)


#: the selectors whose ``select`` is wrapped (each loop's own): unwrapped at the undo
_selectors: weakref.WeakSet[Any] = weakref.WeakSet()


def _loop_init(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            sel = self._selector
            fn = sel.select
            if not is_wrapped(fn):
                sel.select = Selector.make(fn)  # this loop's selector only
                _selectors.add(sel)
        except (AttributeError, TypeError):  # a selector without a __dict__: left alone
            pass

    return __init__


def _unwrap_selectors() -> None:
    """The live loops' selectors call their own ``select`` again."""
    for sel in list(_selectors):
        if is_wrapped(sel.__dict__.get("select")):
            del sel.select
    _selectors.clear()


class Queue:
    """Namespace of the ``asyncio.Queue.get`` wrapper: a get that blocks (the queue is
    empty) marks its thread's loop idle time as a wait for data while it waits."""

    @staticmethod
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        async def get(self: Any) -> Any:
            if not self.empty():
                return await original(self)
            if (
                getattr(st.tls, "t", None) is None
                and st._default_main
                and st.default_trainer_here()
            ):
                st.thread_state()  # the default trainer's state: its loop's idle time counts
            a = lw.idle
            a.getters += 1
            start = _now()
            try:
                out = await original(self)
            finally:
                a.getters -= 1
            try:
                lw.awaited(start, "fed")  # the batch is the trainer's now
            except Exception:  # noqa: BLE001, S110 - never into the user's code
                pass
            return out

        return get


# ------------------------------------------------------------------------ groups


def _add_group(rule: str, start: int, n: int) -> None:
    rl = _modules.get(_RL)
    if rl is not None:
        rl.add_group(rule, start, _now(), n, (_get_ident(),))


def _gather(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def gather(*aws: Any, **kwargs: Any) -> Any:
        if len(aws) < 2 or _modules.get(_RL) is None or _grouping.get():
            return original(*aws, **kwargs)
        start = _now()
        token = _grouping.set(True)  # the tasks made here inherit it
        try:
            fut = original(*aws, **kwargs)
        finally:
            _grouping.reset(token)
        n = len(aws)
        ident = _get_ident()

        def done(_: Any) -> None:
            rl = _modules.get(_RL)
            if rl is not None:
                try:
                    rl.add_group("asyncio.gather", start, _now(), n, (ident,))
                    if _get_ident() == ident:  # the loop's thread: its code has the batch
                        lw.awaited(start)
                except Exception:  # noqa: BLE001, S110 - never into the loop
                    pass

        try:
            fut.add_done_callback(done)
        except Exception:  # noqa: BLE001, S110 - a future of a kind we do not know
            pass
        return fut

    return gather


def _wait(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def wait(fs: Any, *args: Any, **kwargs: Any) -> Any:
        if _modules.get(_RL) is None or _grouping.get():
            return await original(fs, *args, **kwargs)
        start = _now()
        token = _grouping.set(True)
        try:
            out = await original(fs, *args, **kwargs)
        finally:
            _grouping.reset(token)
        try:
            done, pending = out
            if not pending and len(done) >= 2:
                _add_group("asyncio.wait", start, len(done))
            lw.awaited(start)
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass
        return out

    return wait


def _as_completed(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def as_completed(fs: Any, *args: Any, **kwargs: Any) -> Any:
        # a single future or coroutine is refused by asyncio itself, with its own words
        if _modules.get(_RL) is None or _grouping.get() or _is_awaitable_one(fs):
            return original(fs, *args, **kwargs)
        start = _now()
        fs = list(fs)  # read once: an iterator passed in is not read twice
        it = original(fs, *args, **kwargs)
        n = len({id(f) for f in fs})
        if not isinstance(it, GeneratorType) or n < 2:
            return it  # a later Python's iterator object: its groups are not recorded
        return _last_timed(it, start, n)

    return as_completed


def _is_awaitable_one(fs: Any) -> bool:
    aio = _modules["asyncio"]  # patched: loaded
    return bool(aio.isfuture(fs) or aio.iscoroutine(fs))


def _last_timed(it: Any, start: int, n: int) -> Any:
    """``as_completed``'s awaitables, the last one ending the group when awaited. Its
    tasks are made at the first step of ``it``, in the group's context (they inherit it:
    their requests are pieces of the group's wait)."""
    token = _grouping.set(True)
    try:
        first = next(it, None)
    finally:
        _grouping.reset(token)
    if first is None:
        return
    yield first  # n >= 2: not the last
    for i, aw in enumerate(it, 1):
        yield aw if i < n - 1 else _group_end(aw, start, n)


async def _group_end(aw: Any, start: int, n: int) -> Any:
    out = await aw
    try:
        _add_group("asyncio.as_completed", start, n)
        lw.awaited(start)
    except Exception:  # noqa: BLE001, S110 - never into the user's code
        pass
    return out


_TG_START = "_gyreprof_group_start"
_TG_TOKEN = "_gyreprof_group_token"


def _tg_aenter(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def __aenter__(self: Any) -> Any:
        out = await original(self)
        if _modules.get(_RL) is not None and not _grouping.get():
            try:
                setattr(self, _TG_START, _now())
                setattr(self, _TG_TOKEN, _grouping.set(True))  # in the task's own context
            except (AttributeError, TypeError):
                pass
        return out

    return __aenter__


def _tg_aexit(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def __aexit__(self: Any, et: Any, exc: Any, tb: Any) -> Any:
        try:
            return await original(self, et, exc, tb)
        finally:
            start = self.__dict__.pop(_TG_START, None)
            token = self.__dict__.pop(_TG_TOKEN, None)
            if start is not None:
                try:
                    _grouping.reset(token)
                    _add_group("asyncio.TaskGroup", start, 0)
                    lw.awaited(start)
                except Exception:  # noqa: BLE001, S110 - never into the user's code
                    pass

    return __aexit__


def _forget_groups() -> None:
    lw.group_open = None


def _swap(mods: list[ModuleType], name: str, make: Callable[..., Any]) -> None:
    """Replace function ``name`` in each module that holds the same original."""
    first = getattr(mods[0], name, None)
    if not _inst.patches.replace(mods[0], name, make):
        return
    for m in mods[1:]:
        if getattr(m, name, None) is first:
            _inst.patches.set(m, name, getattr(mods[0], name))


def install(asyncio: ModuleType) -> None:
    """Patch ``asyncio`` (the package, imported whole)."""
    import asyncio.queues
    import asyncio.selector_events
    import asyncio.tasks

    global _grouping
    if "_grouping" not in globals():
        import contextvars

        _grouping = contextvars.ContextVar("gyreprof_batch_group", default=False)
    patches = _inst.patches
    lw.group_open = _grouping  # the request log reads it: a gathered request is a piece
    patches.on_undo(_forget_groups)
    if patches.replace(asyncio.selector_events.BaseSelectorEventLoop, "__init__", _loop_init):
        patches.on_undo(_unwrap_selectors)
    patches.replace_tree(asyncio.queues.Queue, ("get",), Queue.make)
    _swap([asyncio.tasks, asyncio], "gather", _gather)
    _swap([asyncio.tasks, asyncio], "wait", _wait)
    _swap([asyncio.tasks, asyncio], "as_completed", _as_completed)
    tg = _modules.get("asyncio.taskgroups")
    if tg is not None:
        patches.replace_tree(tg.TaskGroup, ("__aenter__",), _tg_aenter)
        patches.replace_tree(tg.TaskGroup, ("__aexit__",), _tg_aexit)


_inst = Instrumentor("asyncio", {"asyncio": install})


def instrument() -> None:
    """Patch asyncio now (imported) or when it is imported; undone by one
    :func:`uninstrument` (the loops made meanwhile call their selector's own ``select``
    again)."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()


__all__ = ["install", "instrument", "uninstrument"]
