"""PyTorch's instrumentor (:func:`instrument` / :func:`uninstrument`): the update signals
and the policy forwards of every thread's training timeline.

- **Update signals** (``state.update_signal``): torch's global optimizer step
  hooks (``register_optimizer_step_pre_hook`` / ``..._post_hook``, one pair per
  process; they fire in the thread that steps, counted as ``optim_steps``) and
  the backward pass (``torch.Tensor.backward`` and ``torch.autograd.backward``:
  the update begins at the backward's start). They run once per minibatch,
  never per env step; the thread that sends them is the trainer.
- **Policy forwards with grad on** (CleanRL DQN's action: ``q_network(obs)`` outside any
  ``no_grad``): after an optimizer step, the thread's first module call is timed, through
  a one-shot global forward pre-hook (removed at that call) and a forward hook on that
  module's call alone (removed at its return). It is classified as a no-grad block is:
  the sampler's ``fwd`` when an env step follows it before the next update, update work
  otherwise (the next minibatch's forward). No hook is installed outside that window,
  and none on a thread whose framework patch times ``fwd`` itself.
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
    if t.gf_pre is not None or t.gf_post is not None:
        _disarm(t)
    t.trainer.count(st.OPTIM_STEPS)
    st.update_signal(t, t.now())


def _post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = st.thread_state()
    st.update_end(t, t.now())
    if not t.framework:
        _arm(t)


_armed: set[Any] = set()  # thread states whose first-forward hooks are installed


def _arm(t: Any) -> None:
    """Time ``t``'s thread's next module call (a one-shot global pre-hook)."""
    if t.gf_pre is not None or t.gf_post is not None:
        return
    from torch.nn.modules import module

    t.gf_pre = module.register_module_forward_pre_hook(_first_call)
    _armed.add(t)


def _disarm(t: Any) -> None:
    for name in ("gf_pre", "gf_post"):
        handle = getattr(t, name)
        if handle is not None:
            handle.remove()
            setattr(t, name, None)
    t.gf_module = None
    _armed.discard(t)


def _disarm_all() -> None:
    for t in list(_armed):
        _disarm(t)


def _first_call(mod: Any, args: Any) -> None:
    """The global pre-hook: on the armed thread's first module call, remove itself, and
    with grad on time that call (a forward hook until it returns)."""
    t = getattr(st.tls, "t", None)
    if t is None or t.gf_pre is None:
        return  # another thread's call, or already seen by a hook called with this one
    t.gf_pre.remove()
    t.gf_pre = None
    import torch

    if not torch.is_grad_enabled() or t.ng_depth > 0:
        _armed.discard(t)
        return  # a no-grad forward: its block says it
    from torch.nn.modules import module

    t.gf_module = mod
    t.gf_lw = t.srec.last_write_ns()
    t.gf_start = t.now()
    t.gf_post = module.register_module_forward_hook(_first_return, always_call=True)


def _first_return(mod: Any, args: Any, output: Any) -> None:
    t = getattr(st.tls, "t", None)
    if t is None or t.gf_module is not mod:
        return  # a submodule's return, or another thread's
    end = t.now()
    _disarm(t)
    st.grad_forward(t, t.gf_start, end, t.gf_lw)


def _backward(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def backward(*args: Any, **kwargs: Any) -> Any:
        t = st.thread_state()
        if t.gf_pre is not None or t.gf_post is not None:
            _disarm(t)
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
        patches.on_undo(_disarm_all)
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
