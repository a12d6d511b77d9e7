"""transformers' instrumentor (:func:`instrument` / :func:`uninstrument`): ``generate`` of a
model is the sampler's ``generate`` phase.

``GenerationMixin.generate`` and every subclass's own ``generate`` (Whisper,
MusicGen and the like override it and call ``super().generate``) are wrapped;
only the outermost ``generate`` of a thread is timed, so a model whose
``generate`` calls another model's (an assistant, an encoder-decoder's parts)
counts once. A ``generate`` call is one generation batch of an LLM-RL loop
(TRL's ``GRPOTrainer`` calls it once per generation batch): the sampler side of
the trainer's wait. Generation through a server (vLLM, ``trl vllm-serve``) is
not a ``generate`` call here; the HTTP instrumentation sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gyreprof.integrations._auto import state as st
from gyreprof.integrations._auto import versions
from gyreprof.integrations._instrument import Instrumentor

PHASE = "generate"  # one of records.SAMPLER_PHASES

# the versions whose GenerationMixin.generate this wrapper knows (major, minor)
versions.KNOWN.setdefault("transformers", ((4, 40), (6, 0)))

_nest = threading.local()  # this thread is inside a timed generate (the outermost one)


def _thread() -> Any:
    try:
        return st.tls.t
    except AttributeError:
        return st.new_thread()


def _generate(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_nest, "inside", False):
            return original(self, *args, **kwargs)
        timer = _thread().sampler.phase(PHASE)
        _nest.inside = True
        try:
            with timer:
                return original(self, *args, **kwargs)
        finally:
            _nest.inside = False

    return generate


def install(utils: ModuleType) -> None:
    """Patch ``transformers.generation.utils.GenerationMixin`` (once); an unknown
    transformers version: a warning, no patch."""
    import sys

    top = sys.modules.get("transformers")
    problem = versions.check("transformers", getattr(top, "__version__", None))
    if problem is not None:
        st.warn_once("transformers", problem)
        return
    mixin = getattr(utils, "GenerationMixin", None)
    if not isinstance(mixin, type) or "generate" not in mixin.__dict__:
        st.warn_once(
            "transformers",
            "transformers.generation.utils has no GenerationMixin.generate; generation is "
            "not timed in this run",
        )
        return
    _inst.patches.replace_tree(mixin, ("generate",), _generate)
    st.preload()


_inst = Instrumentor("transformers", {"transformers.generation.utils": install})


def instrument() -> None:
    """Patch transformers' ``generate`` now (imported) or when
    ``transformers.generation.utils`` is imported; undone by one :func:`uninstrument`."""
    _inst.instrument()


def uninstrument() -> None:
    """Undo one :func:`instrument`; at the last, every patched attribute is its original."""
    _inst.uninstrument()
