"""PyTorch: the update signals and the policy forwards of every thread's training timeline.

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

from gyreprof.integrations._auto import hooks
from gyreprof.integrations._auto import state as st

_hooks: list[Any] = []  # the optimizer hook handles of this process image (kept alive)


def _pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = st.thread_state()
    t.trainer.count(st.OPTIM_STEPS)
    st.update_signal(t, t.now())


def _post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = st.thread_state()
    st.update_end(t, t.now())


def _backward(original: Callable[..., Any]) -> Callable[..., Any]:
    def backward(*args: Any, **kwargs: Any) -> Any:
        t = st.thread_state()
        st.update_signal(t, t.now())
        try:
            return original(*args, **kwargs)
        finally:
            st.update_end(t, t.now())

    return hooks.mark(backward, original)


def _enter(original: Callable[..., Any]) -> Callable[..., Any]:
    def __enter__(self: Any) -> Any:
        t = getattr(st.tls, "t", None)
        if t is not None and not t.framework:
            st.no_grad_enter(t, t.now())
        return original(self)

    return hooks.mark(__enter__, original)


def _exit(original: Callable[..., Any]) -> Callable[..., Any]:
    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            return original(self, *exc)
        finally:
            t = getattr(st.tls, "t", None)
            if t is not None and not t.framework:
                st.no_grad_exit(t, t.now())

    return hooks.mark(__exit__, original)


def install(torch: ModuleType) -> None:
    """Hook the optimizers, wrap the backward pass and the no-grad blocks (idempotent)."""
    if not _hooks:
        from torch.optim import optimizer as optim

        _hooks.append(optim.register_optimizer_step_pre_hook(_pre_step))
        _hooks.append(optim.register_optimizer_step_post_hook(_post_step))
    tensor = torch.Tensor
    fn = tensor.__dict__.get("backward")
    if fn is not None and not hooks.is_wrapped(fn):
        tensor.backward = _backward(fn)
    autograd = torch.autograd
    fn = getattr(autograd, "backward", None)
    if fn is not None and not hooks.is_wrapped(fn):
        autograd.backward = _backward(fn)
    for cls in (torch.no_grad, torch.inference_mode):
        enter, leave = cls.__dict__.get("__enter__"), cls.__dict__.get("__exit__")
        if enter is None or leave is None or hooks.is_wrapped(enter):
            continue
        cls.__enter__ = _enter(enter)
        cls.__exit__ = _exit(leave)
    st.preload()


def register() -> None:
    hooks.when_imported("torch", install)
