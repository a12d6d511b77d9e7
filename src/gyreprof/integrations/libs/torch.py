"""PyTorch's instrumentor (:func:`instrument` / :func:`uninstrument`): the update signals
and the policy forwards of every thread's training timeline.

- **Update signals** (``state.update_signal``): torch's global optimizer step
  hooks (``register_optimizer_step_pre_hook`` / ``..._post_hook``, one pair per
  process; they fire in the thread that steps, counted as ``optim_steps``) and
  the backward pass (``torch.Tensor.backward`` and ``torch.autograd.backward``:
  the update begins at the backward's start). They run once per minibatch,
  never per env step; the thread that sends them is the trainer.
- **Policy forwards**: the outermost ``torch.no_grad`` / ``torch.inference_mode``
  block of a thread (the decorator forms enter the same classes) is the
  sampler's ``fwd`` when sampling follows it before the next update signal; a
  no-grad block inside the update (a target network's forward,
  ``clip_grad_norm_``) is not. It is classified afterwards (``state.no_grad_enter``
  / ``no_grad_exit``); a thread with no profilers yet is passed straight through,
  and a thread whose framework patch times ``fwd`` itself (stable-baselines3) is
  skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._instrument import Instrumentor

_handles: list[Any] = []  # the optimizer hooks' handles while instrumented


def _remove_hooks() -> None:
    while _handles:
        _handles.pop().remove()


def _pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = st.thread_state()
    t.trainer.count(st.OPTIM_STEPS)
    st.update_signal(t, t.now())


def _post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = st.thread_state()
    st.update_end(t, t.now())


def _backward(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def backward(*args: Any, **kwargs: Any) -> Any:
        t = st.thread_state()
        st.update_signal(t, t.now())
        try:
            return original(*args, **kwargs)
        finally:
            st.update_end(t, t.now())

    return backward


def _enter(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __enter__(self: Any) -> Any:
        t = getattr(st.tls, "t", None)
        if t is not None and not t.framework:
            st.no_grad_enter(t, t.now())
        return original(self)

    return __enter__


def _exit(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            return original(self, *exc)
        finally:
            t = getattr(st.tls, "t", None)
            if t is not None and not t.framework:
                st.no_grad_exit(t, t.now())

    return __exit__


def install(torch: ModuleType) -> None:
    """Hook the optimizers, wrap the backward pass and the no-grad blocks (once)."""
    from torch.optim import optimizer as optim

    patches = _inst.patches
    if not _handles:  # one pair of optimizer hooks, removed at the undo
        _handles.append(optim.register_optimizer_step_pre_hook(_pre_step))
        _handles.append(optim.register_optimizer_step_post_hook(_post_step))
        patches.on_undo(_remove_hooks)
    patches.replace(torch.Tensor, "backward", _backward)
    patches.replace(torch.autograd, "backward", _backward)
    for cls in (torch.no_grad, torch.inference_mode):
        enter, leave = cls.__dict__.get("__enter__"), cls.__dict__.get("__exit__")
        if enter is None or leave is None:
            continue
        patches.replace(cls, "__enter__", _enter)
        patches.replace(cls, "__exit__", _exit)
    st.preload()


_inst = Instrumentor("torch", {"torch": install})


def instrument() -> None:
    """Patch torch now (imported) or when it is imported; undone by one
    :func:`uninstrument` (the optimizer hooks removed, each attribute its original)."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
