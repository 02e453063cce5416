"""The backends by name: the built-in ones (cuda, interpreter, replay, xpu) loaded the first time one is asked for,
and any registered with ``register`` (a plug-in). The members import ``backends.base`` for what they share and nothing
of this registry, so there is no import circle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoforge.backends.base import Backend

from evoforge.core import UsageError

_REGISTRY: dict[str, Callable[..., Backend]] = {}
_builtin_loaded = False
#: what ``auto`` tries, in order
AUTO_ORDER = ("cuda", "xpu", "interpreter")


def register(name: str) -> Callable[[Callable[..., Backend]], Callable[..., Backend]]:
    """Register a backend of one's own (a plug-in) under ``name``: ``get_backend(name)`` then builds it."""
    def deco(factory: Callable[..., Backend]) -> Callable[..., Backend]:
        _load_builtin()  # a plug-in registered under a built-in's name replaces it, whenever the built-ins load
        _REGISTRY[name] = factory
        return factory

    return deco


def _load_builtin() -> None:
    global _builtin_loaded
    if _builtin_loaded:
        return
    from evoforge.backends.cuda import CudaBackend
    from evoforge.backends.interpreter import InterpreterBackend
    from evoforge.backends.replay import ReplayBackend
    from evoforge.backends.xpu import XpuBackend

    for factory in (CudaBackend, InterpreterBackend, ReplayBackend, XpuBackend):
        _REGISTRY[factory.name] = factory
    _builtin_loaded = True  # only once every member loaded: a failed import is raised again, not hidden


def backend_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def simulates(name: str) -> bool:
    """Whether the backend ``name`` is a simulated device (a class with ``SIMULATES = True``: the replay backend),
    which answers campaigns from recorded landscapes and a cost model instead of running kernels."""
    _load_builtin()
    return bool(getattr(_REGISTRY.get(name), "SIMULATES", False))


def available_backend(name: str = "auto", *, flag: str = "--backend", **options: Any) -> Backend:
    """``get_backend``, and a one-line UsageError naming ``flag`` when the backend cannot run here."""
    backend = get_backend(name, **options)
    ok, reason = backend.available()
    if not ok:
        raise UsageError(f"{flag} {name}: not available here ({reason}); try {flag} interpreter")
    return backend


def get_backend(name: str = "auto", **options: Any) -> Backend:
    """A backend by name; ``auto`` picks the first available of cuda, xpu, interpreter."""
    _load_builtin()
    if name == "auto":
        for candidate in AUTO_ORDER:
            backend = _REGISTRY[candidate](**options)
            if backend.available()[0]:
                return backend
    if name not in _REGISTRY:
        raise UsageError(f"--backend {name}: unknown backend (choose from auto, {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name](**options)
