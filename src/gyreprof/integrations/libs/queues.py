"""The queues' instrumentor (:func:`instrument` / :func:`uninstrument`): blocking waits for
data, the training thread's ``wait`` when its data is made elsewhere.

``queue.Queue.get``, ``multiprocessing``'s ``Queue.get`` and ``SimpleQueue.get``,
``concurrent.futures.Future.result`` and ``ray.get`` / ``ray.wait`` (when ray is
imported; RLlib gathers its env runners' samples in ``ray.wait``)
report each blocking call to the thread's training timeline
(``state.data_wait``, kind ``fed``), but only on a thread whose waits count: one
that trains, or the default trainer (the main thread of the run's main process
while no thread has trained, where the wait's end is the update signal, so a
torch-free ``item = q.get(); work(item)`` gets wait = the get, compute = the
rest). Every other thread (a thread pool's idle workers, a worker process) calls
straight through: one thread-local read, no profilers created. A non-blocking
``get(block=False)`` or ``ray.wait(..., timeout=0)`` is not a wait.

``concurrent.futures.wait`` and each step of ``as_completed`` are such waits too
(kind ``own`` when the waiting thread submitted all their futures itself).

**The sampler's idle time**: a blocking ``put`` into a full ``queue.Queue`` or
``multiprocessing`` ``Queue`` on a thread that samples (it has a ThreadState: it stepped an
env or ran a forward) and whose waits do not count (it does not train) is the sampler
waiting for the trainer to take its data: counted, in ns, in its sampler profile's
``idle_ns`` counter (``analysis.verdict.IDLE_COUNTER``), so the report says "idle", not
"untimed". A put into a queue with room, or on any other thread, calls straight through,
keeping only a weak reference to the queue (``deaths.put_into``): should the thread die,
the items it left there are read once (``Death.backlog``).

**Batches of futures** (issue 23): ``Executor.map``, ``concurrent.futures.wait``
(all completed) and ``as_completed`` over 2+ futures record a *group*
(``rollout_log.add_group``, once an HTTP client is patched): from the first
future's submission (``Executor.submit`` stamps it) or the ``map`` call to the last
future's completion, with the threads that completed them (the pool's workers, whose
requests ``analysis.rollouts`` reads as the batch). asyncio's loop, its queue and its
groups have their own instrumentor (``libs.asyncio``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto.deaths import put_into
from gyreprof.integrations._instrument import Instrumentor, Make


def _timed(
    t: st.ThreadState, kind: str, original: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    t.in_wait = True  # a get inside this wait (a future's queue) is part of it
    start = t.now()
    try:
        return original(*args, **kwargs)
    finally:
        t.in_wait = False
        st.data_wait(t, start, t.now(), kind)


def _first(kind: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The default trainer's first wait: its state is made once the wait returned (a wait
    that never returns, a start-up hang, leaves nothing recorded). The wait is reported
    with its duration, placed after the profilers' set-up (which is no compute)."""
    start = time.monotonic_ns()  # the run's profilers' clock (CLOCK_MONOTONIC)
    out = original(*args, **kwargs)
    waited = time.monotonic_ns() - start
    t = st.thread_state()
    end = t.now()
    st.data_wait(t, end - waited, end, kind)
    return out


#: the sampler counter of its idle ns (``analysis.verdict.IDLE_COUNTER``; not imported
#: from there: the bootstrap of every process stays light)
IDLE_NS = "idle_ns"


def _handoff(
    t: st.ThreadState,
    full: Callable[[Any], bool],
    original: Callable[..., Any],
    q: Any,
    args: Any,
    kwargs: Any,
) -> Any:
    """A blocking ``put`` on thread ``t`` (it has a state): when it samples and does not
    train, into a full queue, the time it blocked is the sampler's idle time (see the
    module doc)."""
    if t.waits_count(st._default_main) or not _full(full, q):
        return original(q, *args, **kwargs)
    start = t.now()
    try:
        return original(q, *args, **kwargs)
    finally:
        _count_idle(t, t.now() - start)


def _full(full: Callable[[Any], bool], q: Any) -> bool:
    try:
        return bool(full(q))
    except Exception:  # noqa: BLE001 - a queue that cannot tell: not timed
        return False


def _count_idle(t: st.ThreadState, ns: int) -> None:
    if ns > 0:
        try:
            t.sampler.count(IDLE_NS, ns)
        except Exception:  # noqa: BLE001, S110 - never into the user's code
            pass


def _queue_full(q: Any) -> bool:
    """queue.Queue is full now (its own test, unlocked: a put that finds room does not
    block; one that races a get at the edge is timed or not, either way right)."""
    return bool(0 < q.maxsize <= q._qsize())


def _mp_queue_full(q: Any) -> bool:
    return bool(q._maxsize > 0 and q.full())


def _wait(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return _wait_kind("fed", original, *args, **kwargs)


def _wait_kind(kind: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    t = getattr(st.tls, "t", None)
    if t is None:  # the common case of a pool's idle worker: one read and one compare
        if st._default_main and st.default_trainer_here():
            return _first(kind, original, *args, **kwargs)
        return original(*args, **kwargs)
    w = st.waiting_thread()
    if w is not None:
        return _timed(w, kind, original, *args, **kwargs)
    return original(*args, **kwargs)


def _in_loop() -> bool:
    """The calling thread runs an asyncio event loop now."""
    events = sys.modules.get("asyncio.events")
    return events is not None and events._get_running_loop() is not None


#: on a Future: (thread id, collect blocks closed) of the waiting thread that submitted it
ASKED = "_gyreprof_asked"


def _asked_here(fut: Any) -> bool:
    """``fut`` was submitted by the calling thread since its last update: a result it
    asked for and then waits on (nothing of it was made while it trained)."""
    asked = getattr(fut, ASKED, None)
    if asked is None:
        return False
    t = getattr(st.tls, "t", None)
    if t is None:
        return bool(asked[0] == threading.get_ident() and asked[1] == 0)
    return bool(asked == (t.ident, t.blocks))


# The wrappers are made inside classes named as the ones they wrap, so that a dump of a
# stack (the start-up report's "main thread waits in `Queue.get` (user.py:9)", which
# reads the class from the source) still names the call the user's code waits in.


class Queue:
    """Namespace of the ``Queue.get`` and ``Queue.put`` wrappers (queue and multiprocessing)."""

    @staticmethod
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def get(self: Any, block: bool = True, timeout: float | None = None) -> Any:
            if not block:
                return original(self, block, timeout)
            return _wait(original, self, block, timeout)

        return get

    @staticmethod
    def make_put(full: Callable[[Any], bool]) -> Make:
        """The ``Queue.put`` wrapper, with the queue kind's test of being full. Its
        arguments pass on as given (``queue`` names the item ``item``, ``multiprocessing``
        ``obj``); ``block`` is read where the original has it."""

        def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
            def put(self: Any, *args: Any, **kwargs: Any) -> Any:
                put_into(self)  # what a feeder left behind, read if it dies (deaths)
                t = getattr(st.tls, "t", None)  # most puts: a thread with no state
                if t is None:
                    return original(self, *args, **kwargs)
                block = kwargs["block"] if "block" in kwargs else len(args) < 2 or args[1]
                if not block:
                    return original(self, *args, **kwargs)
                return _handoff(t, full, original, self, args, kwargs)

            return put

        return make


class SimpleQueue:
    """Namespace of the ``multiprocessing.SimpleQueue.get`` wrapper."""

    @staticmethod
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def get(self: Any) -> Any:
            return _wait(original, self)

        return get


class Future:
    """Namespace of the ``concurrent.futures.Future.result`` wrapper. A future the waiting
    thread submitted itself since its last update is a rollout it asked for (kind
    ``own``: the loop is synchronous, the pool works only while the trainer waits);
    any other (submitted before the update, or by another thread) was made while the
    trainer trained (``fed``).

    A finished future read on a thread that runs an event loop is no wait: that is the
    loop copying an executor's result into its own future (``run_in_executor``: a name
    lookup, say), which blocks nothing; on the default trainer it would also end the
    collect block in the middle of a batch (``loop_wait`` says what ends one there)."""

    @staticmethod
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def result(self: Any, timeout: float | None = None) -> Any:
            if _in_loop() and self.done():
                return original(self, timeout)
            return _wait_kind("own" if _asked_here(self) else "fed", original, self, timeout)

        return result


class Executor:
    """Namespace of the ``Executor.submit`` wrapper: a waiting thread's futures carry
    who asked for them, and when (:data:`ASKED`)."""

    @staticmethod
    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def submit(self: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            fut = original(self, fn, *args, **kwargs)
            t = getattr(st.tls, "t", None)
            try:
                if t is None:
                    if st._default_main and st.default_trainer_here():
                        setattr(fut, ASKED, (threading.get_ident(), 0))
                else:
                    w = st.waiting_thread()
                    if w is not None:
                        setattr(fut, ASKED, (w.ident, w.blocks))
            except (AttributeError, TypeError):  # a future type without a __dict__
                pass
            if _modules.get(_RL) is not None:  # an HTTP client is patched: batches count
                _stamp(fut)
            return fut

        return submit

    @staticmethod
    def make_map(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def map(self: Any, fn: Any, *iterables: Any, **kwargs: Any) -> Any:
            if _modules.get(_RL) is None:
                return original(self, fn, *iterables, **kwargs)
            start = _monotonic_ns()
            prev = getattr(_collect, "fs", None)
            fs: list[Any] = []
            _collect.fs = fs  # the submits inside hand their futures here
            try:
                out = original(self, fn, *iterables, **kwargs)
            finally:
                _collect.fs = prev
            _watch("ThreadPoolExecutor.map", start, fs)
            return out

        return map


# ------------------------------------------------------------ batches of futures

_RL = "gyreprof.integrations._auto.rollout_log"
_modules = sys.modules
_monotonic_ns = time.monotonic_ns  # the request log's clock
START = "_gyreprof_t0"  # on a Future: when it was submitted (monotonic ns)
_collect = threading.local()  # .fs: the futures an Executor.map in this thread submits


def _stamp(fut: Any) -> None:
    try:
        setattr(fut, START, _monotonic_ns())
    except (AttributeError, TypeError):
        pass
    fs = getattr(_collect, "fs", None)
    if fs is not None:
        fs.append(fut)


def _watch(rule: str, start: int, fs: list[Any]) -> None:
    """Record ``fs`` as one group once the last of them completes: from ``start`` to then,
    with the threads that completed them (none known when one was done already: then
    any thread of the process)."""
    if len(fs) < 2:
        return
    me = threading.get_ident()
    lock = threading.Lock()
    left = [len(fs)]
    threads: set[int] = set()
    unknown = [False]

    def done(_: Any) -> None:
        ident = threading.get_ident()
        with lock:
            if ident == me:
                unknown[0] = True  # done before it was watched (or completed here)
            else:
                threads.add(ident)
            left[0] -= 1
            last = left[0] == 0
        if last:
            rl = _modules.get(_RL)
            if rl is not None:
                who = () if unknown[0] else tuple(sorted(threads))
                try:
                    rl.add_group(rule, start, _monotonic_ns(), len(fs), who)
                except Exception:  # noqa: BLE001, S110 - never into the user's code
                    pass

    for f in fs:
        try:
            f.add_done_callback(done)
        except Exception:  # noqa: BLE001 - not a future: no group
            return


def _futures_start(fs: list[Any], now: int) -> int:
    stamps = [s for s in (getattr(f, START, None) for f in fs) if isinstance(s, int)]
    return min(stamps) if len(stamps) == len(fs) else now


def _kind_of(fs: list[Any]) -> str:
    """``own`` when the calling thread asked for every one of ``fs`` since its last
    update (see :class:`Future`), else ``fed``."""
    return "own" if fs and all(_asked_here(f) for f in fs) else "fed"


def _futures_wait(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``concurrent.futures.wait``: a blocking wait for data (any ``return_when``); with
    ``ALL_COMPLETED`` over 2+ futures also a group."""

    def wait(fs: Any, timeout: float | None = None, return_when: str = "ALL_COMPLETED") -> Any:
        fs = set(fs)
        listed = list(fs)
        if _modules.get(_RL) is not None and return_when == "ALL_COMPLETED":
            try:
                _watch("futures.wait", _futures_start(listed, _monotonic_ns()), listed)
            except Exception:  # noqa: BLE001, S110 - never into the user's code
                pass
        return _wait_kind(_kind_of(listed), original, fs, timeout, return_when)

    return wait


def _as_completed(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``concurrent.futures.as_completed``: each wait for the next future is a blocking
    wait for data; over 2+ futures the whole is a group."""

    def as_completed(fs: Any, timeout: float | None = None) -> Any:
        fs = set(fs)
        listed = list(fs)
        if _modules.get(_RL) is not None:
            try:
                _watch("as_completed", _futures_start(listed, _monotonic_ns()), listed)
            except Exception:  # noqa: BLE001, S110 - never into the user's code
                pass
        return _timed_next(original(fs, timeout), _kind_of(listed))

    return as_completed


def _timed_next(it: Any, kind: str) -> Any:
    """The futures of ``it`` as they complete, each wait for the next one timed."""
    while True:
        try:
            fut = _wait_kind(kind, next, it)
        except StopIteration:
            return
        yield fut


def _ray_get(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def get(*args: Any, **kwargs: Any) -> Any:
        return _wait(original, *args, **kwargs)

    return get


def _ray_wait(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def wait(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("timeout") == 0:  # a poll, not a wait
            return original(*args, **kwargs)
        return _wait(original, *args, **kwargs)

    return wait


def _install_queue(module: ModuleType) -> None:
    patches = _inst.patches
    patches.replace_tree(module.Queue, ("get",), Queue.make)
    patches.replace_tree(module.Queue, ("put",), Queue.make_put(_queue_full))


def _install_mp_queues(module: ModuleType) -> None:
    patches = _inst.patches
    patches.replace_tree(module.Queue, ("get",), Queue.make)
    patches.replace_tree(module.Queue, ("put",), Queue.make_put(_mp_queue_full))
    patches.replace_tree(module.SimpleQueue, ("get",), SimpleQueue.make)


def _install_futures(module: ModuleType) -> None:
    patches = _inst.patches
    patches.replace_tree(module.Future, ("result",), Future.make)
    # ThreadPoolExecutor / ProcessPoolExecutor (imported lazily: the subclass hook)
    patches.replace_tree(module.Executor, ("submit",), Executor.make, skip=(module.Executor,))
    patches.replace(module.Executor, "map", Executor.make_map)  # Executor's own map only
    pkg = sys.modules.get("concurrent.futures")  # already imported: its copies too
    for name, make in (("wait", _futures_wait), ("as_completed", _as_completed)):
        fn = getattr(module, name, None)
        if (
            patches.replace(module, name, make)
            and pkg is not None
            and getattr(pkg, name, None) is fn
        ):
            patches.set(pkg, name, getattr(module, name))


def _install_ray(ray: ModuleType) -> None:
    _inst.patches.replace(ray, "get", _ray_get)
    _inst.patches.replace(ray, "wait", _ray_wait)


_inst = Instrumentor(
    "queues",
    {
        "queue": _install_queue,
        "multiprocessing.queues": _install_mp_queues,
        "concurrent.futures._base": _install_futures,
        "ray": _install_ray,
    },
)


def instrument() -> None:
    """Patch the queues, futures and ``ray.get`` / ``ray.wait`` now (each imported) or
    when each is imported; undone by one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
